// The path rules: absolute without "..", and a file a request names resolved inside the directories
// the operator configured, with symlinks followed on a real file system.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "hostagent/common/paths.hpp"
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
  Result<fs::path> check(const fs::path& path) const { return file_inside(path.string(), allowed, "boot_image"); }
};

std::string refusal(const Result<fs::path>& result) {
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

TEST_CASE("a file inside an allowed directory is answered as its real path") {
  const Images fixture;
  const auto real_images = fs::canonical(fixture.images);
  CHECK(fixture.check(fixture.images / "base.qcow2").value() == real_images / "base.qcow2");
  CHECK(fixture.check(fixture.images / "sub" / "other.raw").value() == real_images / "sub" / "other.raw");
  // A link inside to a file inside is followed: what is opened later is the file, not the link.
  fs::create_symlink(fixture.images / "sub" / "other.raw", fixture.images / "current.raw");
  CHECK(fixture.check(fixture.images / "current.raw").value() == real_images / "sub" / "other.raw");
  // The allowed directory may itself be reached through a link.
  fs::create_directory_symlink(fixture.images, fixture.dir.path() / "images-link");
  const AllowedDirectories through_link{{fixture.dir.path() / "images-link"}, "images.directories"};
  CHECK(file_inside((fixture.images / "base.qcow2").string(), through_link, "boot_image").value() ==
        real_images / "base.qcow2");
}

TEST_CASE("a file outside, or a link that leads out, is refused naming where files may lie") {
  const Images fixture;
  const auto outside = refusal(fixture.check("/etc/passwd"));
  CHECK(outside.find("boot_image \"/etc/passwd\" is outside the allowed directories; files may lie in " +
                     fixture.images.string() + " (images.directories)") != std::string::npos);
  // A sibling whose name starts with the allowed one's is not inside it.
  CHECK(refusal(fixture.check(fixture.dir.path() / "images-evil" / "x.raw")).find("is outside") != std::string::npos);
  fs::create_symlink(fixture.dir.path() / "secret", fixture.images / "innocent.raw");
  const auto linked = refusal(fixture.check(fixture.images / "innocent.raw"));
  CHECK(linked.find("leads to \"" + fs::canonical(fixture.dir.path() / "secret").string() + "\"") != std::string::npos);
  CHECK(linked.find("is outside") != std::string::npos);
}

TEST_CASE("what is not an existing regular file is refused, and '..' before anything is looked up") {
  const Images fixture;
  CHECK(refusal(fixture.check(fixture.images / "missing.qcow2")).find("does not exist; files may lie in") !=
        std::string::npos);
  CHECK(refusal(fixture.check(fixture.images / "sub")).find("is not a regular file") != std::string::npos);
  CHECK(refusal(fixture.check(fixture.images / "base.qcow2" / "x")).find("does not exist") != std::string::npos);
  CHECK(refusal(fixture.check(fixture.images.string() + "/../secret")).find("contains '..'") != std::string::npos);
  CHECK(refusal(fixture.check("base.qcow2")).find("it is relative") != std::string::npos);
  const AllowedDirectories none{{}, "images.directories"};
  const auto empty = file_inside((fixture.images / "base.qcow2").string(), none, "boot_image");
  CHECK(refusal(empty).find("images.directories lists no directory: add the one that holds it") != std::string::npos);
}

}  // namespace
}  // namespace hostagent
