void menagerie_proto_placeholder(void);
