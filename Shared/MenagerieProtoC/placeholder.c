#include "MenagerieProtoC.h"
void menagerie_proto_placeholder(void) {}
