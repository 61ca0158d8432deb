#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/bio.h>
#include <openssl/evp.h>

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

/* --- A BIO over the caller's memory (in place of two memory BIOs) -------------------------------------------------
 * Two memory BIOs cost a copy each way on top of what TLS must do: ciphertext the socket read was copied into the
 * incoming BIO before OpenSSL copied it into its record buffer, and each record OpenSSL sealed was copied into the
 * outgoing BIO and out again into the socket's outbox. This one reads from bytes the caller lends for the length of
 * one call (keeping only what is left of them unread), and hands each sealed record to the caller's sink, which
 * copies it straight into the outbox; without a sink it keeps the records, as a memory BIO does, for
 * `ctls_io_drain`. node's TLSWrap and h2o do the same with BIOs of their own. */
#include <stdlib.h>
#include <string.h>

typedef void (*ctls_sink)(void *context, const unsigned char *bytes, size_t count);

typedef struct {
    const unsigned char *lent; size_t lent_len, lent_off;
    unsigned char *kept; size_t kept_len, kept_off, kept_cap;
    unsigned char *out; size_t out_len, out_off, out_cap;
    ctls_sink sink; void *context;
    int failed; /* an allocation failed: the BIO reports an error from then on */
} ctls_io;

static inline int ctls_io_reserve(unsigned char **buffer, size_t *cap, size_t need) {
    if (need <= *cap) return 1;
    size_t cap2 = *cap ? *cap : 4096;
    while (cap2 < need) cap2 *= 2;
    unsigned char *grown = (unsigned char *)realloc(*buffer, cap2);
    if (!grown) return 0;
    *buffer = grown; *cap = cap2;
    return 1;
}

static inline int ctls_io_write(BIO *bio, const char *data, int length) {
    ctls_io *io = (ctls_io *)BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    if (!io || io->failed || length < 0) return -1;
    if (io->sink) { io->sink(io->context, (const unsigned char *)data, (size_t)length); return length; }
    if (io->out_off == io->out_len) io->out_off = io->out_len = 0;
    if (!ctls_io_reserve(&io->out, &io->out_cap, io->out_len + (size_t)length)) { io->failed = 1; return -1; }
    memcpy(io->out + io->out_len, data, (size_t)length);
    io->out_len += (size_t)length;
    return length;
}

static inline int ctls_io_read(BIO *bio, char *into, int length) {
    ctls_io *io = (ctls_io *)BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    if (!io || io->failed || length < 0) return -1;
    size_t done = 0, want = (size_t)length;
    if (io->kept_off < io->kept_len) {
        size_t n = io->kept_len - io->kept_off; if (n > want) n = want;
        memcpy(into, io->kept + io->kept_off, n); io->kept_off += n; done += n;
        if (io->kept_off == io->kept_len) io->kept_off = io->kept_len = 0;
    }
    if (done < want && io->lent_off < io->lent_len) {
        size_t n = io->lent_len - io->lent_off; if (n > want - done) n = want - done;
        memcpy(into + done, io->lent + io->lent_off, n); io->lent_off += n; done += n;
    }
    if (done == 0) { BIO_set_retry_read(bio); return -1; }
    return (int)done;
}

static inline long ctls_io_ctrl(BIO *bio, int command, long number, void *pointer) {
    (void)number; (void)pointer;
    ctls_io *io = (ctls_io *)BIO_get_data(bio);
    switch (command) {
    case BIO_CTRL_FLUSH: return 1;
    case BIO_CTRL_PENDING: return io ? (long)((io->kept_len - io->kept_off) + (io->lent_len - io->lent_off)) : 0;
    case BIO_CTRL_WPENDING: return io ? (long)(io->out_len - io->out_off) : 0;
    default: return 0;
    }
}

static inline int ctls_io_create(BIO *bio) {
    ctls_io *io = (ctls_io *)calloc(1, sizeof(ctls_io));
    if (!io) return 0;
    BIO_set_data(bio, io);
    BIO_set_init(bio, 1);
    return 1;
}

static inline int ctls_io_destroy(BIO *bio) {
    ctls_io *io = (ctls_io *)BIO_get_data(bio);
    if (io) { free(io->kept); free(io->out); free(io); }
    BIO_set_data(bio, NULL);
    return 1;
}

/* The method, made once (every BIO points to it); a function's static, as Swift emits no header's globals. */
static inline BIO_METHOD **ctls_io_method_slot(void) {
    static BIO_METHOD *method = NULL;
    return &method;
}
static inline void ctls_io_make_method(void) {
    BIO_METHOD *method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "menagerie caller memory");
    if (!method) return;
    BIO_meth_set_write(method, ctls_io_write);
    BIO_meth_set_read(method, ctls_io_read);
    BIO_meth_set_ctrl(method, ctls_io_ctrl);
    BIO_meth_set_create(method, ctls_io_create);
    BIO_meth_set_destroy(method, ctls_io_destroy);
    *ctls_io_method_slot() = method;
}

/* A new BIO over the caller's memory (NULL when OpenSSL could not make one). */
static inline BIO *ctls_io_new(void) {
    static CRYPTO_ONCE once = CRYPTO_ONCE_STATIC_INIT;
    if (!CRYPTO_THREAD_run_once(&once, ctls_io_make_method) || !*ctls_io_method_slot()) return NULL;
    return BIO_new(*ctls_io_method_slot());
}

/* Lends `count` bytes of ciphertext from the peer until `ctls_io_keep_unread`. */
static inline void ctls_io_lend(BIO *bio, const unsigned char *bytes, size_t count) {
    ctls_io *io = (ctls_io *)BIO_get_data(bio);
    io->lent = bytes; io->lent_len = count; io->lent_off = 0;
}

/* Ends the loan: what OpenSSL did not read of it is copied and kept for later reads. 0 when memory ran out. */
static inline int ctls_io_keep_unread(BIO *bio) {
    ctls_io *io = (ctls_io *)BIO_get_data(bio);
    size_t left = io->lent_len - io->lent_off;
    if (left > 0) {
        if (io->kept_off > 0) {
            memmove(io->kept, io->kept + io->kept_off, io->kept_len - io->kept_off);
            io->kept_len -= io->kept_off; io->kept_off = 0;
        }
        if (!ctls_io_reserve(&io->kept, &io->kept_cap, io->kept_len + left)) { io->failed = 1; return 0; }
        memcpy(io->kept + io->kept_len, io->lent + io->lent_off, left);
        io->kept_len += left;
    }
    io->lent = NULL; io->lent_len = io->lent_off = 0;
    return 1;
}

/* Ciphertext from the peer, copied (the memory BIO's way, for callers that own no lasting buffer). */
static inline int ctls_io_feed(BIO *bio, const unsigned char *bytes, size_t count) {
    ctls_io_lend(bio, bytes, count);
    return ctls_io_keep_unread(bio);
}

/* Each sealed record goes to `sink` from now on; NULL keeps them for `ctls_io_drain`. */
static inline void ctls_io_set_sink(BIO *bio, ctls_sink sink, void *context) {
    ctls_io *io = (ctls_io *)BIO_get_data(bio);
    io->sink = sink; io->context = context;
}

/* Moves up to `count` kept bytes of ciphertext for the peer into `into`; returns how many. */
static inline size_t ctls_io_drain(BIO *bio, unsigned char *into, size_t count) {
    ctls_io *io = (ctls_io *)BIO_get_data(bio);
    size_t n = io->out_len - io->out_off; if (n > count) n = count;
    if (n == 0) return 0;
    memcpy(into, io->out + io->out_off, n); io->out_off += n;
    if (io->out_off == io->out_len) io->out_off = io->out_len = 0;
    return n;
}
