/*
 * auth.h — proving knowledge of the job's secret on a fresh connection,
 * without sending it: the side that accepts sends a random nonce (the
 * challenge), the side that connects answers with its own nonce, its hello
 * and HMAC-SHA256(secret, label, both nonces, hello); the acceptor checks
 * it and answers with its own tag over the same, which the connector
 * checks.  Labels differ by purpose ("loom/ring", "loom/tcp", ...) and by
 * side, so that no proof can be replayed on another connection, for
 * another purpose, or reflected back.  docs/security.md has the model.
 */
#ifndef LOOM_NET_AUTH_H
#define LOOM_NET_AUTH_H

#include "loom.h"

#include <stddef.h>
#include <stdint.h>

/* The job's secret: every connection proves it, none sends it. */
#define LOOM_SECRET_BYTES 16
#define LOOM_AUTH_NONCE_BYTES 16
#define LOOM_AUTH_TAG_BYTES 32
#define LOOM_AUTH_MAGIC 0x4c4d4132u /* "LMA2": a Loom challenge */
#define LOOM_AUTH_CHALLENGE_BYTES (4 + LOOM_AUTH_NONCE_BYTES)
/* What the connector sends before its hello: its nonce and its tag. */
#define LOOM_AUTH_PROOF_BYTES (LOOM_AUTH_NONCE_BYTES + LOOM_AUTH_TAG_BYTES)

/* Fills a nonce from getrandom (never blocks after boot). */
loomResult_t loom_auth_nonce(uint8_t nonce[LOOM_AUTH_NONCE_BYTES]);

void loom_auth_challenge_encode(const uint8_t nonce[LOOM_AUTH_NONCE_BYTES],
                                uint8_t out[LOOM_AUTH_CHALLENGE_BYTES]);
/* 0, or -1 when `in` is not a Loom challenge. */
int loom_auth_challenge_decode(const uint8_t in[LOOM_AUTH_CHALLENGE_BYTES],
                               uint8_t nonce[LOOM_AUTH_NONCE_BYTES]);

/* HMAC-SHA256(secret, label "/" side, challenge nonce, connector nonce,
 * data).  side: 'c' for the connector's proof, 'a' for the acceptor's. */
void loom_auth_tag(const uint8_t secret[LOOM_SECRET_BYTES], const char *label, char side,
                   const uint8_t challenge[LOOM_AUTH_NONCE_BYTES],
                   const uint8_t nonce[LOOM_AUTH_NONCE_BYTES], const void *data, size_t len,
                   uint8_t tag[LOOM_AUTH_TAG_BYTES]);
/* 1 when tag is loom_auth_tag(...) of the same inputs (constant time). */
int loom_auth_check(const uint8_t secret[LOOM_SECRET_BYTES], const char *label, char side,
                    const uint8_t challenge[LOOM_AUTH_NONCE_BYTES],
                    const uint8_t nonce[LOOM_AUTH_NONCE_BYTES], const void *data, size_t len,
                    const uint8_t tag[LOOM_AUTH_TAG_BYTES]);

/* One handshake's nonces, kept between its halves. */
struct loom_auth_state {
  uint8_t challenge[LOOM_AUTH_NONCE_BYTES]; /* the acceptor's */
  uint8_t nonce[LOOM_AUTH_NONCE_BYTES];     /* the connector's */
  int lost; /* prove failed because the connection closed or broke (not a refusal):
               worth another try */
};

/* The handshake in halves, for callers that must interleave them (the
 * bootstrap ring, where every rank connects and accepts at once).
 * Connector: prove (wait for the challenge, send proof and hello), later
 * confirm (check the acceptor's answer).  Acceptor: challenge (send it;
 * -1 when the peer is gone), later verify (read and check the proof and
 * hello, send the answer; -1 with a reason in *why). */
loomResult_t loom_auth_prove(int fd, const uint8_t secret[LOOM_SECRET_BYTES], const char *label,
                             const void *hello, size_t len, uint64_t deadline, const char *what,
                             struct loom_auth_state *st);
loomResult_t loom_auth_confirm(int fd, const uint8_t secret[LOOM_SECRET_BYTES],
                               const char *label, const void *hello, size_t len,
                               uint64_t deadline, const char *what,
                               const struct loom_auth_state *st);
int loom_auth_challenge(int fd, uint64_t deadline, struct loom_auth_state *st);
int loom_auth_verify(int fd, const uint8_t secret[LOOM_SECRET_BYTES], const char *label,
                     void *hello, size_t len, uint64_t deadline, struct loom_auth_state *st,
                     const char **why);

/* The whole handshake over a connected blocking-with-deadline socket.
 * Connector: waits for the challenge, sends proof and hello (len bytes),
 * checks the acceptor's tag.  Errors name `what`. */
loomResult_t loom_auth_connect(int fd, const uint8_t secret[LOOM_SECRET_BYTES],
                               const char *label, const void *hello, size_t len,
                               uint64_t deadline, const char *what);
/* Acceptor: sends the challenge, reads proof and hello (len bytes into
 * hello), checks the proof, answers with its tag.  0, or -1 with a reason
 * in *why (the caller drops the connection and logs it). */
int loom_auth_accept(int fd, const uint8_t secret[LOOM_SECRET_BYTES], const char *label,
                     void *hello, size_t len, uint64_t deadline, const char **why);

/* Copies peer-supplied text for logging: printable ASCII kept, anything
 * else (control characters, escape sequences, bytes >= 0x7f) becomes '?'. */
void loom_sanitize_text(char *dst, size_t cap, const char *src, size_t len);

/* Constant-time comparison of two secrets (1 when equal). */
int loom_secret_equal(const uint8_t *a, const uint8_t *b);

#endif
