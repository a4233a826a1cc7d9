/* test_access.c — a0_arena_check_access, the rule for attaching to an
 * existing shm object or file this process did not create: a regular file,
 * owned by the trusted uid, with no permission bit outside the mode asked
 * for; decided on the open descriptor, never on the path.
 *
 * Plain C, no framework: CHECK() counts, the last line is "N passed, M
 * failed", the exit status is non-zero on any failure. Run as root it also
 * checks an object that really belongs to another uid (fchown). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "a0_arena.h"
#include "a0_err.h"

#include "check.h"

static char dir[] = "/tmp/a0py-test-access-XXXXXX";

static char* path_of(const char* leaf) {
  static char buf[256];
  snprintf(buf, sizeof buf, "%s/%s", dir, leaf);
  return buf;
}

/* A new regular file with exactly `mode` (fchmod: the umask does not count). */
static int new_file(const char* leaf, mode_t mode) {
  int fd = open(path_of(leaf), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 || fchmod(fd, mode) != 0) {
    perror("new_file");
    abort();
  }
  return fd;
}

static void test_own_private_file_is_accepted(void) {
  int fd = new_file("own", 0600);
  a0_access_info_t info;
  CHECK_ERR(a0_arena_check_access(fd, (uint32_t)geteuid(), 0600, &info), A0_OK);
  CHECK(info.uid == (uint32_t)geteuid());
  CHECK(S_ISREG(info.mode) && (info.mode & 07777) == 0600);
  CHECK_ERR(a0_arena_check_access(fd, (uint32_t)geteuid(), 0600, NULL), A0_OK);
  close(fd);
  /* Fewer bits than asked for grant nothing more: accepted. */
  fd = new_file("readonly", 0400);
  CHECK_ERR(a0_arena_check_access(fd, (uint32_t)geteuid(), 0600, NULL), A0_OK);
  close(fd);
}

static void test_group_or_other_bits_beyond_the_mode_are_refused(void) {
  const mode_t modes[] = {0640, 0660, 0604, 0606, 0666, 0700, 04600, 01600};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
    char leaf[32];
    snprintf(leaf, sizeof leaf, "mode%o", (unsigned)modes[i]);
    int fd = new_file(leaf, modes[i]);
    a0_access_info_t info;
    CHECK_ERR(a0_arena_check_access(fd, (uint32_t)geteuid(), 0600, &info), A0_ERR_MODE_TOO_OPEN);
    CHECK((info.mode & 07777) == modes[i]);
    /* The same object is accepted by a caller that asked for that mode. */
    CHECK_ERR(a0_arena_check_access(fd, (uint32_t)geteuid(), modes[i], NULL), A0_OK);
    close(fd);
  }
}

static void test_another_owner_is_refused(void) {
  int fd = new_file("owner", 0600);
  uint32_t other = (uint32_t)geteuid() + 1;
  a0_access_info_t info;
  CHECK_ERR(a0_arena_check_access(fd, other, 0600, &info), A0_ERR_FOREIGN_OWNER);
  CHECK(info.uid == (uint32_t)geteuid());
  if (geteuid() == 0) {
    /* Root is no exception: an object of uid 65534 is refused to uid 0,
     * whatever its mode, and accepted only when that uid is named. */
    CHECK(fchown(fd, 65534, 65534) == 0);
    CHECK_ERR(a0_arena_check_access(fd, 0, 0600, &info), A0_ERR_FOREIGN_OWNER);
    CHECK(info.uid == 65534 && info.gid == 65534);
    CHECK(fchmod(fd, 0666) == 0);
    CHECK_ERR(a0_arena_check_access(fd, 0, 0777, NULL), A0_ERR_FOREIGN_OWNER);
    CHECK_ERR(a0_arena_check_access(fd, 65534, 0600, NULL), A0_ERR_MODE_TOO_OPEN);
    CHECK_ERR(a0_arena_check_access(fd, 65534, 0666, NULL), A0_OK);
  } else {
    printf("(not root: the fchown half of %s skipped)\n", __func__);
  }
  close(fd);
}

static void test_what_is_not_a_regular_file_is_refused(void) {
  CHECK(mkfifo(path_of("fifo"), 0600) == 0);
  int fd = open(path_of("fifo"), O_RDWR | O_CLOEXEC); /* does not block on Linux */
  CHECK(fd >= 0);
  a0_access_info_t info;
  CHECK_ERR(a0_arena_check_access(fd, (uint32_t)geteuid(), 0600, &info), A0_ERR_NOT_REGULAR);
  CHECK(S_ISFIFO(info.mode));
  close(fd);
  fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  CHECK_ERR(a0_arena_check_access(fd, (uint32_t)geteuid(), 07777, &info), A0_ERR_NOT_REGULAR);
  CHECK(S_ISDIR(info.mode));
  close(fd);
}

/* The check is about the descriptor that will be mapped: replacing the name
 * afterwards (the usual race against a check by path) changes nothing. */
static void test_decided_on_the_descriptor_not_the_path(void) {
  int fd = new_file("swap", 0600);
  CHECK(unlink(path_of("swap")) == 0);
  int other = new_file("swap", 0666);
  CHECK_ERR(a0_arena_check_access(fd, (uint32_t)geteuid(), 0600, NULL), A0_OK);
  CHECK_ERR(a0_arena_check_access(other, (uint32_t)geteuid(), 0600, NULL), A0_ERR_MODE_TOO_OPEN);
  close(other);
  close(fd);
}

static void test_shared_memory_object(void) {
  char name[64];
  snprintf(name, sizeof name, "/a0py-test-access-%ld", (long)getpid());
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  CHECK(fd >= 0);
  shm_unlink(name);
  CHECK_ERR(a0_arena_check_access(fd, (uint32_t)geteuid(), 0600, NULL), A0_OK);
  CHECK(fchmod(fd, 0666) == 0);
  CHECK_ERR(a0_arena_check_access(fd, (uint32_t)geteuid(), 0600, NULL), A0_ERR_MODE_TOO_OPEN);
  close(fd);
}

static void test_bad_descriptor_is_a_system_error(void) {
  a0_access_info_t info = {.uid = 7, .gid = 7, .mode = 7};
  errno = 0;
  CHECK_ERR(a0_arena_check_access(-1, 0, 0600, &info), A0_ERR_SYS);
  CHECK(errno == EBADF);
  CHECK(info.uid == 0 && info.gid == 0 && info.mode == 0);
}

static void remove_dir(void) {
  const char* leaves[] = {"own", "readonly", "owner", "fifo", "swap"};
  for (size_t i = 0; i < sizeof leaves / sizeof leaves[0]; i++) unlink(path_of(leaves[i]));
  const mode_t modes[] = {0640, 0660, 0604, 0606, 0666, 0700, 04600, 01600};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
    char leaf[32];
    snprintf(leaf, sizeof leaf, "mode%o", (unsigned)modes[i]);
    unlink(path_of(leaf));
  }
  rmdir(dir);
}

int main(void) {
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_own_private_file_is_accepted();
  test_group_or_other_bits_beyond_the_mode_are_refused();
  test_another_owner_is_refused();
  test_what_is_not_a_regular_file_is_refused();
  test_decided_on_the_descriptor_not_the_path();
  test_shared_memory_object();
  test_bad_descriptor_is_a_system_error();
  remove_dir();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
