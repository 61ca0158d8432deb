#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/bio.h>

/// OpenSSL's setters below are macros over `*_ctrl`, which Swift cannot call: one function each.
static inline int ctls_set_min_tls13(SSL_CTX *ctx) {
    return (int)SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
}

static inline long ctls_ctx_set_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }

static inline long ctls_set_sni(SSL *ssl, const char *name) { return SSL_set_tlsext_host_name(ssl, name); }

/// An empty memory BIO reads as "try again", not as the end of the stream: bytes may still come.
static inline long ctls_bio_retry_when_empty(BIO *bio) { return BIO_set_mem_eof_return(bio, -1); }

static inline void ctls_free(void *pointer) { OPENSSL_free(pointer); }

static inline const unsigned char *ctls_next_alpn(const unsigned char *server, unsigned int server_len,
                                                  const unsigned char *client, unsigned int client_len,
                                                  unsigned char *out_len) {
    unsigned char *out = NULL;
    if (SSL_select_next_proto(&out, out_len, server, server_len, client, client_len) != OPENSSL_NPN_NEGOTIATED) return NULL;
    return out;
}

/// One-line subject names as RFC 2253 writes them (`CN=zoo,O=Menagerie`); a macro of macros in OpenSSL.
static inline unsigned long ctls_name_flags_rfc2253(void) { return XN_FLAG_RFC2253; }
