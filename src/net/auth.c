/*
 * auth.c — challenge and response over a job's secret (auth.h).
 */
#include "net/auth.h"
#include "net/bytes.h"
#include "net/socket.h"
#include "core/error.h"
#include "core/hmac.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

loomResult_t loom_auth_nonce(uint8_t nonce[LOOM_AUTH_NONCE_BYTES]) {
  ssize_t got = getrandom(nonce, LOOM_AUTH_NONCE_BYTES, 0);
  if (got != LOOM_AUTH_NONCE_BYTES)
    return loom_error(loomSystemError, LOOM_LOG_BOOTSTRAP, "getrandom failed making a nonce: %s",
                      got < 0 ? strerror(errno) : "short read");
  return loomSuccess;
}

void loom_auth_challenge_encode(const uint8_t nonce[LOOM_AUTH_NONCE_BYTES],
                                uint8_t out[LOOM_AUTH_CHALLENGE_BYTES]) {
  loom_put_u32(out, LOOM_AUTH_MAGIC);
  memcpy(out + 4, nonce, LOOM_AUTH_NONCE_BYTES);
}

int loom_auth_challenge_decode(const uint8_t in[LOOM_AUTH_CHALLENGE_BYTES],
                               uint8_t nonce[LOOM_AUTH_NONCE_BYTES]) {
  if (loom_get_u32(in) != LOOM_AUTH_MAGIC)
    return -1;
  memcpy(nonce, in + 4, LOOM_AUTH_NONCE_BYTES);
  return 0;
}

void loom_auth_tag(const uint8_t secret[LOOM_SECRET_BYTES], const char *label, char side,
                   const uint8_t challenge[LOOM_AUTH_NONCE_BYTES],
                   const uint8_t nonce[LOOM_AUTH_NONCE_BYTES], const void *data, size_t len,
                   uint8_t tag[LOOM_AUTH_TAG_BYTES]) {
  const char sep[2] = {'/', side};
  const struct loom_bytes parts[] = {{.p = label, .len = strlen(label)},
                                     {.p = sep, .len = sizeof sep},
                                     {.p = challenge, .len = LOOM_AUTH_NONCE_BYTES},
                                     {.p = nonce, .len = LOOM_AUTH_NONCE_BYTES},
                                     {.p = data, .len = len}};
  loom_hmac_sha256(secret, LOOM_SECRET_BYTES, parts, 5, tag);
}

int loom_auth_check(const uint8_t secret[LOOM_SECRET_BYTES], const char *label, char side,
                    const uint8_t challenge[LOOM_AUTH_NONCE_BYTES],
                    const uint8_t nonce[LOOM_AUTH_NONCE_BYTES], const void *data, size_t len,
                    const uint8_t tag[LOOM_AUTH_TAG_BYTES]) {
  uint8_t want[LOOM_AUTH_TAG_BYTES];
  loom_auth_tag(secret, label, side, challenge, nonce, data, len, want);
  return loom_bytes_equal_ct(want, tag, LOOM_AUTH_TAG_BYTES);
}

loomResult_t loom_auth_prove(int fd, const uint8_t secret[LOOM_SECRET_BYTES], const char *label,
                             const void *hello, size_t len, uint64_t deadline, const char *what,
                             struct loom_auth_state *st) {
  uint8_t raw[LOOM_AUTH_CHALLENGE_BYTES], proof[LOOM_AUTH_PROOF_BYTES];
  st->lost = 0;
  loomResult_t res = loom_socket_recv_all(fd, raw, sizeof raw, deadline, what);
  if (res != loomSuccess) {
    st->lost = res == loomRemoteError;
    return res;
  }
  if (loom_auth_challenge_decode(raw, st->challenge) != 0)
    return loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                      "%s did not answer as a Loom process (no challenge): another program "
                      "listens on that port",
                      what);
  LOOM_CHECK(loom_auth_nonce(st->nonce));
  memcpy(proof, st->nonce, LOOM_AUTH_NONCE_BYTES);
  loom_auth_tag(secret, label, 'c', st->challenge, st->nonce, hello, len,
                proof + LOOM_AUTH_NONCE_BYTES);
  res = loom_socket_send_all(fd, proof, sizeof proof, deadline, what);
  if (res == loomSuccess)
    res = loom_socket_send_all(fd, hello, len, deadline, what);
  st->lost = res == loomRemoteError;
  return res;
}

loomResult_t loom_auth_confirm(int fd, const uint8_t secret[LOOM_SECRET_BYTES],
                               const char *label, const void *hello, size_t len,
                               uint64_t deadline, const char *what,
                               const struct loom_auth_state *st) {
  uint8_t answer[LOOM_AUTH_TAG_BYTES];
  /* An acceptor that checked our proof and found it wrong closes without
   * an answer (it owes a stranger no reason): say what that most likely
   * means. */
  loomResult_t got = loom_socket_recv_all(fd, answer, sizeof answer, deadline, NULL);
  if (got == loomTimeout)
    return loom_error(loomTimeout, LOOM_LOG_BOOTSTRAP, "%s did not answer the handshake in time",
                      what);
  if (got != loomSuccess)
    return loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                      "%s refused the handshake: it closed the connection after our proof "
                      "(a rank of another communicator or job, whose secret differs, or the "
                      "process exited)",
                      what);
  if (!loom_auth_check(secret, label, 'a', st->challenge, st->nonce, hello, len, answer))
    return loom_error(loomRemoteError, LOOM_LOG_BOOTSTRAP,
                      "%s did not prove it knows this job's secret (a process of another "
                      "job at the same address?)",
                      what);
  return loomSuccess;
}

loomResult_t loom_auth_connect(int fd, const uint8_t secret[LOOM_SECRET_BYTES],
                               const char *label, const void *hello, size_t len,
                               uint64_t deadline, const char *what) {
  struct loom_auth_state st;
  LOOM_CHECK(loom_auth_prove(fd, secret, label, hello, len, deadline, what, &st));
  return loom_auth_confirm(fd, secret, label, hello, len, deadline, what, &st);
}

int loom_auth_challenge(int fd, uint64_t deadline, struct loom_auth_state *st) {
  uint8_t raw[LOOM_AUTH_CHALLENGE_BYTES];
  if (loom_auth_nonce(st->challenge) != loomSuccess)
    return -1;
  loom_auth_challenge_encode(st->challenge, raw);
  return loom_socket_send_all(fd, raw, sizeof raw, deadline, NULL) == loomSuccess ? 0 : -1;
}

int loom_auth_verify(int fd, const uint8_t secret[LOOM_SECRET_BYTES], const char *label,
                     void *hello, size_t len, uint64_t deadline, struct loom_auth_state *st,
                     const char **why) {
  uint8_t proof[LOOM_AUTH_PROOF_BYTES], answer[LOOM_AUTH_TAG_BYTES];
  if (loom_socket_recv_all(fd, proof, sizeof proof, deadline, NULL) != loomSuccess ||
      loom_socket_recv_all(fd, hello, len, deadline, NULL) != loomSuccess) {
    *why = "no complete proof and hello in time";
    return -1;
  }
  memcpy(st->nonce, proof, LOOM_AUTH_NONCE_BYTES);
  if (!loom_auth_check(secret, label, 'c', st->challenge, st->nonce, hello, len,
                       proof + LOOM_AUTH_NONCE_BYTES)) {
    *why = "wrong proof of the job's secret (another job, or a stranger)";
    return -1;
  }
  loom_auth_tag(secret, label, 'a', st->challenge, st->nonce, hello, len, answer);
  if (loom_socket_send_all(fd, answer, sizeof answer, deadline, NULL) != loomSuccess) {
    *why = "closed before our answer";
    return -1;
  }
  return 0;
}

int loom_auth_accept(int fd, const uint8_t secret[LOOM_SECRET_BYTES], const char *label,
                     void *hello, size_t len, uint64_t deadline, const char **why) {
  struct loom_auth_state st;
  *why = NULL;
  if (loom_auth_challenge(fd, deadline, &st) != 0) {
    *why = "closed before our challenge";
    return -1;
  }
  return loom_auth_verify(fd, secret, label, hello, len, deadline, &st, why);
}

void loom_sanitize_text(char *dst, size_t cap, const char *src, size_t len) {
  if (cap == 0)
    return;
  size_t n = len < cap - 1 ? len : cap - 1;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)src[i];
    dst[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
  }
  dst[n] = '\0';
}

int loom_secret_equal(const uint8_t *a, const uint8_t *b) {
  uint8_t diff = 0;
  for (int i = 0; i < LOOM_SECRET_BYTES; i++)
    diff |= (uint8_t)(a[i] ^ b[i]);
  return diff == 0;
}
