#include "test_support.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <linux/fs.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

namespace hostagent::testing {
namespace fs = std::filesystem;

namespace {

// Marks `directory` the top of directory hierarchies (FS_TOPDIR_FL, `chattr +T`) where its
// filesystem has the flag; elsewhere (tmpfs: ENOTTY) it stays as it is. ext4's Orlov allocator
// then spreads the directories made in it over the block groups, as it spreads the root's
// (fs/ext4/ialloc.c, find_group_orlov), instead of packing each beside the last. Why it matters:
// on an ext4 without a journal, a new inode skips every inode of its group freed in the last 60 s
// (300 s while their inode table block is dirty), looking each one up (find_inode_bit ->
// recently_deleted). The suites write and delete sysfs trees of thousands of files; packed in one
// group, an openat cost 300 us and a mkdir 700 us on CI's disk, and discovery and numa ran 169 s
// there against 6 s on tmpfs; spread, 36-43 s. The unit tier: 951 s against 401 s on tmpfs.
void spread_subdirectories(const std::string& directory) {
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  int flags = 0;
  if (::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && (flags & FS_TOPDIR_FL) == 0) {
    flags |= FS_TOPDIR_FL;
    ::ioctl(fd, FS_IOC_SETFLAGS, &flags);  // refused: the directories are packed, and only slower
  }
  ::close(fd);
}

}  // namespace

// $TMPDIR/hostagent-tests-UID, this user's and spread (above), made once per process: every test's
// directory is made in it. 0711: QEMU (another user) walks in to the files a test gives a guest.
// When it cannot be this user's directory, $TMPDIR itself.
const fs::path& tests_scratch_parent() {
  static const fs::path parent = [] {
    const char* tmpdir = std::getenv("TMPDIR");
    std::string base = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
    std::string path = base + "/hostagent-tests-" + std::to_string(::getuid());
    ::mkdir(path.c_str(), 0711);  // EEXIST: checked below, like any other
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid()) return base;
    ::chmod(path.c_str(), 0711);
    spread_subdirectories(path);
    return path;
  }();
  return parent;
}

TempDir::TempDir() {
  std::string templ = (tests_scratch_parent() / "hostagent-test-XXXXXX").string();
  if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = templ;
}

TempDir::~TempDir() {
  std::error_code ec;
  // Fixture trees may hold read-only directories; make them writable so removal succeeds.
  for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::end(it); it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) {
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    }
  }
  fs::remove_all(path_, ec);
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

void skip(const std::string& why) {
  std::cout << "SKIPPED: " << why << std::endl;
}

const fs::path& source_dir() {
  static const fs::path dir = HOSTAGENT_SOURCE_DIR;
  return dir;
}

const fs::path& golden_dir() {
  static const fs::path dir = source_dir() / "tests" / "golden";
  return dir;
}

const fs::path& shipped_templates_dir() {
  static const fs::path dir = source_dir() / "vmtemplates" / "templates";
  return dir;
}

std::optional<fs::path> reference_data_or_skip() {
  const char* dir = std::getenv("HOSTAGENT_REFERENCE_DATA");
  if (dir == nullptr || *dir == '\0') {
    skip("HOSTAGENT_REFERENCE_DATA is not set (point it at shared/data)");
    return std::nullopt;
  }
  if (!fs::is_directory(dir)) {
    skip(std::string("HOSTAGENT_REFERENCE_DATA=") + dir + " is not a directory");
    return std::nullopt;
  }
  return fs::path(dir);
}

std::string read_text_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_text_file(const fs::path& path, const std::string& text) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);  // a failure shows as the write's
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string compare_golden(const std::string& name, const std::string& actual) {
  const fs::path path = golden_dir() / name;
  const char* update = std::getenv("HOSTAGENT_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << actual;
    return {};
  }
  if (!fs::exists(path)) {
    return "golden file " + path.string() + " is missing; run with HOSTAGENT_UPDATE_GOLDEN=1";
  }
  const std::string expected = read_text_file(path);
  if (expected == actual) return {};
  std::istringstream e(expected), a(actual);
  std::string el, al;
  for (int line = 1;; ++line) {
    const bool more_e = static_cast<bool>(std::getline(e, el));
    const bool more_a = static_cast<bool>(std::getline(a, al));
    if (!more_e && !more_a) break;
    if (!more_e || !more_a || el != al) {
      return path.string() + ":" + std::to_string(line) + ": expected '" + (more_e ? el : "<eof>") + "', got '" +
             (more_a ? al : "<eof>") + "' (HOSTAGENT_UPDATE_GOLDEN=1 rewrites it if the change is intended)";
    }
  }
  return path.string() + ": differs";
}

CommandResult run_command(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  int pipefd[2];
  if (pipe(pipefd) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(pipefd[1], STDOUT_FILENO);
    dup2(pipefd[1], STDERR_FILENO);
    close(pipefd[0]);
    close(pipefd[1]);
    for (const auto& kv : extra_env) putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::perror(args[0]);
    _exit(127);
  }
  close(pipefd[1]);
  CommandResult result;
  std::array<char, 4096> buf{};
  ssize_t n = 0;
  while ((n = read(pipefd[0], buf.data(), buf.size())) > 0) result.output.append(buf.data(), n);
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::optional<fs::path> find_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const fs::path candidate = fs::path(dir) / name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

fs::path extract_tarball(const fs::path& tarball, const fs::path& dir) {
  const auto r = run_command({"tar", "-xjf", tarball.string(), "-C", dir.string()});
  if (r.exit_code != 0) throw std::runtime_error("tar failed on " + tarball.string() + ": " + r.output);
  return dir;
}

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) files.push_back(entry.path());
  return files;
}

pid_t spawn_logged(const std::vector<std::string>& argv, const std::filesystem::path& log) {
  REQUIRE(!argv.empty());
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const std::string log_path = log.string();
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<std::string> words = argv;
  std::vector<char*> args;
  args.reserve(words.size() + 1);
  for (auto& word : words) args.push_back(word.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE_MESSAGE(spawned == 0, "cannot start " << argv.front() << ": " << std::strerror(spawned));
  return pid;
}

}  // namespace hostagent::testing
