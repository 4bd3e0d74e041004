// The path rules: absolute without "..", and a file a request names opened beneath the directories
// the operator configured, on a real file system: a symlink inside may lead elsewhere inside, never
// out; nothing that is not a regular file is opened as one, and nothing blocks (issue 43, defects
// 5 and 10: a FIFO hung a worker; refusals told which host paths exist and where links lead).
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "hostagent/common/paths.hpp"
#include "hostagent/common/text_file.hpp"
#include "test_support.hpp"

namespace hostagent {
namespace {

namespace fs = std::filesystem;

struct Images {
  testing::TempDir dir;
  fs::path images = dir.path() / "images";
  AllowedDirectories allowed{{images}, "images.directories"};
  Images() {
    fs::create_directories(images / "sub");
    std::ofstream(images / "base.qcow2") << "qcow2";
    std::ofstream(images / "sub" / "other.raw") << "raw";
    std::ofstream(dir.path() / "secret") << "host file";
    fs::create_directories(dir.path() / "images-evil");
    std::ofstream(dir.path() / "images-evil" / "x.raw") << "beside";
  }
  Result<OpenedFile> check(const fs::path& path) const {
    return open_inside(path.string(), allowed, "boot_image", FileLimits{0, false});
  }
};

std::string refusal(const Result<OpenedFile>& result) {
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().code == ErrorCode::invalid_argument);
  CHECK(result.error().field == "boot_image");
  return result.error().message;
}

TEST_CASE("absolute paths without '..': each problem named") {
  CHECK_FALSE(absolute_path_problem("/var/lib/hostagent/images/a.qcow2"));
  CHECK(absolute_path_problem("") == "it is empty");
  CHECK(absolute_path_problem("images/a.qcow2") == "it is relative");
  CHECK(absolute_path_problem(std::string("/a\0b", 4)) == "it contains a NUL byte");
  CHECK(absolute_path_problem("/var/lib/../../etc/shadow") == "it contains '..'");
}

TEST_CASE("a file inside an allowed directory is opened, and answered as the path the kernel resolved") {
  const Images fixture;
  const auto real_images = fs::canonical(fixture.images);
  CHECK(fixture.check(fixture.images / "base.qcow2").value().path == real_images / "base.qcow2");
  CHECK(fixture.check(fixture.images / "sub" / "other.raw").value().path == real_images / "sub" / "other.raw");
  // A link inside to a file inside is followed: what is opened later is the file, not the link.
  fs::create_symlink(fixture.images / "sub" / "other.raw", fixture.images / "current.raw");
  CHECK(fixture.check(fixture.images / "current.raw").value().path == real_images / "sub" / "other.raw");
  fs::create_symlink("sub/other.raw", fixture.images / "relative.raw");
  CHECK(fixture.check(fixture.images / "relative.raw").value().path == real_images / "sub" / "other.raw");
  // The allowed directory may itself be a link, named as configured, with or without a slash.
  fs::create_directory_symlink(fixture.images, fixture.dir.path() / "images-link");
  const AllowedDirectories through_link{{fixture.dir.path().string() + "/images-link/"}, "images.directories"};
  CHECK(open_inside((fixture.dir.path() / "images-link" / "base.qcow2").string(), through_link, "boot_image", {})
            .value()
            .path == real_images / "base.qcow2");
}

TEST_CASE("a path outside is refused without looking at it, and a link that leads out without saying where") {
  const Images fixture;
  for (const std::string outside : {"/etc/passwd", "/etc/no-such-file", "/proc/self/cwd", "/proc/self/exe"}) {
    const auto refused = refusal(fixture.check(outside));
    CHECK(refused == "boot_image \"" + outside + "\" is outside the allowed directories; files may lie in " +
                         fixture.images.string() + " (images.directories)");
  }
  // A sibling whose name starts with the allowed one's is not inside it.
  CHECK(refusal(fixture.check(fixture.dir.path() / "images-evil" / "x.raw")).find("is outside") != std::string::npos);
  fs::create_symlink(fixture.dir.path() / "secret", fixture.images / "innocent.raw");
  fs::create_symlink("../secret", fixture.images / "relative-out.raw");
  fs::create_symlink("/proc/self/exe", fixture.images / "magic.raw");
  for (const char* name : {"innocent.raw", "relative-out.raw", "magic.raw"}) {
    CAPTURE(name);
    const auto linked = refusal(fixture.check(fixture.images / name));
    CHECK(linked.find("leads outside " + fixture.images.string() + " (a symlink out of it)") != std::string::npos);
    CHECK(linked.find("secret") == std::string::npos);
    CHECK(linked.find("/proc") == std::string::npos);
  }
}

TEST_CASE("what is not a regular file is refused, at once, and a kernel refusal is the caller's error") {
  const Images fixture;
  CHECK(refusal(fixture.check(fixture.images / "missing.qcow2")).find("does not exist in") != std::string::npos);
  CHECK(refusal(fixture.check(fixture.images / "sub")).find("is a directory, not a regular file") != std::string::npos);
  CHECK(refusal(fixture.check(fixture.images / "base.qcow2" / "x")).find("is not a directory") != std::string::npos);
  CHECK(refusal(fixture.check(fixture.images.string() + "/../secret")).find("contains '..'") != std::string::npos);
  CHECK(refusal(fixture.check("base.qcow2")).find("it is relative") != std::string::npos);
  // A FIFO no one writes to: open(2) would wait for a writer forever without O_NONBLOCK.
  REQUIRE(::mkfifo((fixture.images / "pipe.raw").c_str(), 0600) == 0);
  CHECK(refusal(fixture.check(fixture.images / "pipe.raw")).find("is a FIFO, not a regular file") != std::string::npos);
  fs::create_symlink("/dev/zero", fixture.images / "zero.raw");
  CHECK(refusal(fixture.check(fixture.images / "zero.raw")).find("leads outside") != std::string::npos);
  // A loop, and a name longer than the kernel takes: the caller's to fix, not a server error.
  fs::create_symlink("loop-b.raw", fixture.images / "loop-a.raw");
  fs::create_symlink("loop-a.raw", fixture.images / "loop-b.raw");
  CHECK(refusal(fixture.check(fixture.images / "loop-a.raw")).find("too many symlinks") != std::string::npos);
  CHECK(refusal(fixture.check(fixture.images / std::string(300, 'a'))).find("too long") != std::string::npos);
  if (::geteuid() != 0) {
    fs::permissions(fixture.images / "base.qcow2", fs::perms::none);
    CHECK(refusal(fixture.check(fixture.images / "base.qcow2")).find("permission denied") != std::string::npos);
  }
  const AllowedDirectories none{{}, "images.directories"};
  const auto empty = open_inside((fixture.images / "base.qcow2").string(), none, "boot_image", {});
  CHECK(refusal(empty).find("images.directories lists no directory: add the one that holds it") != std::string::npos);
}

TEST_CASE("a named file: never blocks, a regular file only, and no larger than allowed") {
  testing::TempDir dir;
  REQUIRE(::mkfifo((dir.path() / "config.yaml").c_str(), 0600) == 0);
  const auto fifo = read_text_file(dir.path() / "config.yaml");
  REQUIRE_FALSE(fifo.ok());
  CHECK(fifo.error().message.find("is a FIFO, not a regular file") != std::string::npos);
  const auto zero = read_text_file("/dev/zero");
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.error().message.find("is a character device") != std::string::npos);
  fs::create_symlink("/dev/zero", dir.path() / "token");
  const auto token = read_token_file(dir.path() / "token", "api.token_file");
  REQUIRE_FALSE(token.ok());
  CHECK(token.error().message.find("is a character device") != std::string::npos);
  testing::write_text_file(dir.path() / "big", std::string(kMaxTokenFileBytes + 1, 'a'));
  const auto big = read_token_file(dir.path() / "big", "api.token_file");
  REQUIRE_FALSE(big.ok());
  CHECK(big.error().message.find("more than the 65536 it may hold") != std::string::npos);
  const auto missing = read_text_file(dir.path() / "missing.yaml");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::not_found);
}

}  // namespace
}  // namespace hostagent
