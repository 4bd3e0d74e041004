// open_beneath's two ways to resolve a name beneath a directory: openat2(2) with RESOLVE_BENEATH,
// and the user-space walk it falls back to where openat2 is refused. The package test's container
// refused it (systemd-nspawn's seccomp filter answered ENOSYS) and hostagentd would not start, so
// the walk must give what the kernel gives, name for name, and be what runs under such a filter.
#include <doctest/doctest.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "hostagent/common/named_file.hpp"
#include "test_support.hpp"

namespace hostagent {
namespace {

namespace fs = std::filesystem;

// A directory with every shape a name beneath it can take.
struct Shapes {
  testing::TempDir dir;
  fs::path root = dir.path() / "images";
  Shapes() {
    fs::create_directories(root / "sub" / "deeper");
    testing::write_text_file(root / "base.raw", "base");
    testing::write_text_file(root / "sub" / "other.raw", "other");
    testing::write_text_file(dir.path() / "secret", "host file");
    fs::create_symlink(root / "sub" / "other.raw", root / "absolute-inside.raw");
    fs::create_symlink("sub/other.raw", root / "relative-inside.raw");
    fs::create_symlink("../other.raw", root / "sub" / "deeper" / "up.raw");
    fs::create_symlink("sub/deeper", root / "to-deeper");
    fs::create_symlink(dir.path() / "secret", root / "absolute-out.raw");
    fs::create_symlink("../secret", root / "relative-out.raw");
    fs::create_symlink("/proc/self/exe", root / "magic.raw");
    fs::create_symlink("loop-b", root / "loop-a");
    fs::create_symlink("loop-a", root / "loop-b");
    fs::create_symlink("/dev/zero", root / "zero.raw");
    REQUIRE(::mkfifo((root / "pipe.raw").c_str(), 0600) == 0);
  }
};

const std::vector<std::string> kNames = {
    "base.raw",
    "sub/other.raw",
    "absolute-inside.raw",
    "relative-inside.raw",
    "sub/deeper/up.raw",
    "to-deeper/up.raw",
    "to-deeper/../other.raw",
    "sub/../base.raw",
    "absolute-out.raw",
    "relative-out.raw",
    "magic.raw",
    "loop-a",
    "zero.raw",
    "pipe.raw",
    "sub",
    "sub/..",
    "../secret",
    "base.raw/x",
    "missing.raw",
    std::string(300, 'a'),
};

// What an open gave, in a form two resolvers can be compared by: the file, or the refusal.
std::string outcome(const Result<OpenedFile>& opened) {
  if (!opened.ok()) return std::string(to_string(opened.error().code)) + ": " + opened.error().message;
  struct stat st {};
  REQUIRE(::fstat(opened->fd.get(), &st) == 0);
  return "inode " + std::to_string(st.st_ino) + ", " + std::to_string(opened->size) + " bytes";
}

TEST_CASE("the user-space walk opens and refuses every name as openat2 does") {
  const Shapes shapes;
  for (const auto& name : kNames) {
    CAPTURE(name);
    const auto kernel = outcome(open_beneath(shapes.root, name, {}, "boot_image"));
    CHECK(outcome(open_beneath_walking(shapes.root, name, {}, "boot_image")) == kernel);
  }
  // What each gives, so that "the same" is not "the same mistake".
  CHECK(outcome(open_beneath_walking(shapes.root, "to-deeper/up.raw", {}, "f")).find("5 bytes") != std::string::npos);
  CHECK(outcome(open_beneath_walking(shapes.root, "relative-out.raw", {}, "f")).find("leads outside") !=
        std::string::npos);
  CHECK(outcome(open_beneath_walking(shapes.root, "loop-a", {}, "f")).find("too many symlinks") != std::string::npos);
  CHECK(outcome(open_beneath_walking(shapes.root, "base.raw/x", {}, "f")).find("not a directory") != std::string::npos);
}

TEST_CASE("the walk follows an absolute link that names the directory as configured, through a link to it") {
  const Shapes shapes;
  const fs::path configured = shapes.dir.path() / "images-link";
  fs::create_directory_symlink(shapes.root, configured);
  fs::create_symlink(configured / "base.raw", shapes.root / "via-configured.raw");
  const auto opened = open_beneath_walking(configured, "via-configured.raw", {}, "boot_image");
  CHECK(outcome(opened).find("4 bytes") != std::string::npos);
}

#if defined(__x86_64__)
// Installs, in this process, a seccomp filter that answers openat2 with ENOSYS and lets every other
// call through: what a container that predates openat2 does to it.
bool refuse_openat2() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) == 0;
}

TEST_CASE("under a seccomp filter that refuses openat2, open_beneath walks: it opens inside and refuses out") {
  const Shapes shapes;
  // A child of its own: the filter cannot be taken off again. Its exit status says what it saw.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (!refuse_openat2()) ::_exit(10);
    const auto inside = open_beneath(shapes.root, "relative-inside.raw", {}, "boot_image");
    if (!inside.ok()) ::_exit(11);
    const auto out = open_beneath(shapes.root, "absolute-out.raw", {}, "boot_image");
    if (out.ok() || out.error().message.find("leads outside") == std::string::npos) ::_exit(12);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  INFO("10: the filter was not installed; 11: the file inside was not opened; 12: the link out was not refused");
  CHECK(WEXITSTATUS(status) == 0);
}
#else
TEST_CASE("under a seccomp filter that refuses openat2, open_beneath walks: it opens inside and refuses out") {
  testing::skip("the test's seccomp filter is written for x86_64");
}
#endif

}  // namespace
}  // namespace hostagent
