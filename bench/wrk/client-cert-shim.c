/* LD_PRELOAD shim giving wrk a TLS client certificate (wrk has no option for one).
 *
 * wrk creates its one SSL_CTX with SSL_CTX_new(); this wrapper calls OpenSSL's, then loads the
 * certificate chain and key named by BENCH_CLIENT_CERT / BENCH_CLIENT_KEY into it, so every
 * connection wrk opens presents that certificate and the listener's mTLS identity is exercised.
 * Nothing else about wrk changes. Built by bench/setup.sh: cc -shared -fPIC -O2 ... -ldl
 * (no OpenSSL headers needed: the few symbols are looked up at run time). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_method_st SSL_METHOD;
#define PEM_FILETYPE 1 /* SSL_FILETYPE_PEM */

SSL_CTX *SSL_CTX_new(const SSL_METHOD *method) {
    SSL_CTX *(*real_new)(const SSL_METHOD *) = (SSL_CTX * (*)(const SSL_METHOD *)) dlsym(RTLD_NEXT, "SSL_CTX_new");
    if (!real_new) {
        fprintf(stderr, "client-cert-shim: SSL_CTX_new not found\n");
        abort();
    }
    SSL_CTX *ctx = real_new(method);
    const char *cert = getenv("BENCH_CLIENT_CERT");
    const char *key = getenv("BENCH_CLIENT_KEY");
    if (!ctx || !cert || !key) return ctx;
    int (*use_chain)(SSL_CTX *, const char *) =
        (int (*)(SSL_CTX *, const char *)) dlsym(RTLD_DEFAULT, "SSL_CTX_use_certificate_chain_file");
    int (*use_key)(SSL_CTX *, const char *, int) =
        (int (*)(SSL_CTX *, const char *, int)) dlsym(RTLD_DEFAULT, "SSL_CTX_use_PrivateKey_file");
    if (!use_chain || !use_key || use_chain(ctx, cert) != 1 || use_key(ctx, key, PEM_FILETYPE) != 1) {
        fprintf(stderr, "client-cert-shim: cannot load client certificate %s / key %s\n", cert, key);
        abort();
    }
    return ctx;
}
