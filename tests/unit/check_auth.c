/*
 * check_auth.c — SHA-256 and HMAC-SHA256 against the standards' vectors,
 * the challenge/response of net/auth.c over socket pairs (the right
 * secret, a wrong one, a stranger, a replayed proof), and the sanitising
 * of peer-supplied text.
 */
#include "net/auth.h"
#include "core/error.h"
#include "core/hmac.h"
#include "core/timeutil.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void hex(const uint8_t *b, size_t n, char *out) {
  for (size_t i = 0; i < n; i++)
    sprintf(out + 2 * i, "%02x", b[i]);
}

START_TEST(sha256_vectors) {
  static const struct {
    const char *in, *want;
  } v[] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
  };
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    uint8_t d[LOOM_SHA256_BYTES];
    char got[65];
    loom_sha256(v[i].in, strlen(v[i].in), d);
    hex(d, sizeof d, got);
    ck_assert_str_eq(got, v[i].want);
  }
  /* a million 'a's, fed in odd pieces */
  struct loom_sha256 c;
  loom_sha256_init(&c);
  char a[997];
  memset(a, 'a', sizeof a);
  size_t left = 1000000;
  while (left > 0) {
    size_t n = left < sizeof a ? left : sizeof a;
    loom_sha256_update(&c, a, n);
    left -= n;
  }
  uint8_t d[LOOM_SHA256_BYTES];
  char got[65];
  loom_sha256_final(&c, d);
  hex(d, sizeof d, got);
  ck_assert_str_eq(got, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

/* RFC 4231 test cases 1, 2 and 6 (a key longer than the block). */
START_TEST(hmac_vectors) {
  uint8_t key1[20], key6[131], out[LOOM_SHA256_BYTES];
  char got[65];
  memset(key1, 0x0b, sizeof key1);
  memset(key6, 0xaa, sizeof key6);
  struct loom_bytes m1 = {"Hi There", 8};
  loom_hmac_sha256(key1, sizeof key1, &m1, 1, out);
  hex(out, sizeof out, got);
  ck_assert_str_eq(got, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  struct loom_bytes m2[2] = {{"what do ya want ", 16}, {"for nothing?", 12}};
  loom_hmac_sha256((const uint8_t *)"Jefe", 4, m2, 2, out);
  hex(out, sizeof out, got);
  ck_assert_str_eq(got, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  const char *t6 = "Test Using Larger Than Block-Size Key - Hash Key First";
  struct loom_bytes m6 = {t6, strlen(t6)};
  loom_hmac_sha256(key6, sizeof key6, &m6, 1, out);
  hex(out, sizeof out, got);
  ck_assert_str_eq(got, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}
END_TEST

/* A tag depends on every input: label, side, both nonces, data, secret. */
START_TEST(tags_bind_everything) {
  uint8_t secret[LOOM_SECRET_BYTES] = {1, 2, 3}, other[LOOM_SECRET_BYTES] = {1, 2, 4};
  uint8_t ch[LOOM_AUTH_NONCE_BYTES] = {9}, no[LOOM_AUTH_NONCE_BYTES] = {7};
  uint8_t ch2[LOOM_AUTH_NONCE_BYTES] = {8}, tag[LOOM_AUTH_TAG_BYTES];
  loom_auth_tag(secret, "loom/tcp", 'c', ch, no, "hi", 2, tag);
  ck_assert(loom_auth_check(secret, "loom/tcp", 'c', ch, no, "hi", 2, tag));
  ck_assert(!loom_auth_check(other, "loom/tcp", 'c', ch, no, "hi", 2, tag));
  ck_assert(!loom_auth_check(secret, "loom/ring", 'c', ch, no, "hi", 2, tag));
  ck_assert(!loom_auth_check(secret, "loom/tcp", 'a', ch, no, "hi", 2, tag));
  ck_assert(!loom_auth_check(secret, "loom/tcp", 'c', ch2, no, "hi", 2, tag));
  ck_assert(!loom_auth_check(secret, "loom/tcp", 'c', ch, ch2, "hi", 2, tag));
  ck_assert(!loom_auth_check(secret, "loom/tcp", 'c', ch, no, "ho", 2, tag));
}
END_TEST

struct acceptor {
  int fd;
  uint8_t secret[LOOM_SECRET_BYTES];
  int result;
  uint8_t hello[8];
  const char *why;
};

static void *accept_main(void *arg) {
  struct acceptor *a = arg;
  a->result = loom_auth_accept(a->fd, a->secret, "loom/test", a->hello, sizeof a->hello,
                               loom_deadline_ms(2000), &a->why);
  shutdown(a->fd, SHUT_RDWR);
  return NULL;
}

/* Runs a handshake over a socket pair; returns the connector's result. */
static loomResult_t handshake(uint8_t connector_key, uint8_t acceptor_key, struct acceptor *a) {
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  uint8_t secret[LOOM_SECRET_BYTES];
  memset(secret, connector_key, sizeof secret);
  memset(a->secret, acceptor_key, sizeof a->secret);
  a->fd = sv[1];
  pthread_t t;
  pthread_create(&t, NULL, accept_main, a);
  loomResult_t res = loom_auth_connect(sv[0], secret, "loom/test", "rank 3!", 8,
                                       loom_deadline_ms(2000), "the test acceptor");
  pthread_join(t, NULL);
  close(sv[0]);
  close(sv[1]);
  return res;
}

START_TEST(handshake_right_and_wrong_secret) {
  struct acceptor a;
  ck_assert_int_eq(handshake(5, 5, &a), loomSuccess);
  ck_assert_int_eq(a.result, 0);
  ck_assert_str_eq((const char *)a.hello, "rank 3!");
  ck_assert_int_ne(handshake(5, 6, &a), loomSuccess);
  ck_assert_int_eq(a.result, -1);
  ck_assert_ptr_nonnull(strstr(a.why, "wrong proof"));
}
END_TEST

/* A proof recorded on one connection is worthless on the next: the
 * acceptor's challenge differs. */
START_TEST(replayed_proof_refused) {
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  uint8_t secret[LOOM_SECRET_BYTES] = {42}, raw[LOOM_AUTH_CHALLENGE_BYTES];
  uint8_t challenge[LOOM_AUTH_NONCE_BYTES], proof[LOOM_AUTH_PROOF_BYTES];
  /* the captured exchange: a proof for some earlier challenge */
  memset(challenge, 0x11, sizeof challenge);
  memset(proof, 0x22, LOOM_AUTH_NONCE_BYTES);
  loom_auth_tag(secret, "loom/test", 'c', challenge, proof, "rank 3!", 8,
                proof + LOOM_AUTH_NONCE_BYTES);
  struct acceptor a = {.fd = sv[1]};
  memcpy(a.secret, secret, sizeof secret);
  pthread_t t;
  pthread_create(&t, NULL, accept_main, &a);
  ck_assert_int_eq(read(sv[0], raw, sizeof raw), (ssize_t)sizeof raw);
  ck_assert_int_eq(write(sv[0], proof, sizeof proof), (ssize_t)sizeof proof);
  ck_assert_int_eq(write(sv[0], "rank 3!", 8), 8);
  pthread_join(t, NULL);
  ck_assert_int_eq(a.result, -1);
  close(sv[0]);
  close(sv[1]);
}
END_TEST

/* A peer that is not Loom: garbage instead of a challenge. */
START_TEST(stranger_refused) {
  int sv[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ck_assert_int_eq(write(sv[1], "HTTP/1.1 400 Bad\r\n\r\n", 20), 20);
  uint8_t secret[LOOM_SECRET_BYTES] = {1};
  loomResult_t res = loom_auth_connect(sv[0], secret, "loom/test", "x", 1,
                                       loom_deadline_ms(500), "a web server");
  ck_assert_int_eq(res, loomRemoteError);
  ck_assert_ptr_nonnull(strstr(loom_last_error(), "not answer as a Loom process"));
  close(sv[0]);
  close(sv[1]);
}
END_TEST

START_TEST(sanitize) {
  char out[16];
  loom_sanitize_text(out, sizeof out, "ok\x1b[31mred\n\xff", 12);
  ck_assert_str_eq(out, "ok?[31mred??");
  loom_sanitize_text(out, 4, "abcdef", 6);
  ck_assert_str_eq(out, "abc");
}
END_TEST

static Suite *auth_suite(void) {
  Suite *s = suite_create("auth");
  TCase *tc = tcase_create("auth");
  tcase_set_timeout(tc, 20);
  tcase_add_test(tc, sha256_vectors);
  tcase_add_test(tc, hmac_vectors);
  tcase_add_test(tc, tags_bind_everything);
  tcase_add_test(tc, handshake_right_and_wrong_secret);
  tcase_add_test(tc, replayed_proof_refused);
  tcase_add_test(tc, stranger_refused);
  tcase_add_test(tc, sanitize);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(auth_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? 0 : 1;
}
