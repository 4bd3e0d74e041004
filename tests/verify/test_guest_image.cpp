// verify/guest_image: the cpio "newc" writer (read back by a parser written from the
// format's description and by busybox's cpio), the static-ELF test, the kernel choice, and the probe
// image built on this host.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <fstream>
#include <set>

#include "hostagent/verify/guest_image.hpp"
#include "hostagent/verify/guest_view.hpp"
#include "newc_reader.hpp"
#include "test_support.hpp"

namespace hostagent::verify {
namespace {

namespace fs = std::filesystem;

std::string write_temp(const fs::path& file, const std::string& data) {
  std::ofstream(file, std::ios::binary) << data;
  return file.string();
}

TEST_CASE("newc archive: headers, names, data and padding as the kernel's initramfs unpacker reads them") {
  const std::vector<CpioEntry> entries = {
      {"d", CpioEntry::Kind::directory, 0755, {}},     {"d/f", CpioEntry::Kind::file, 0640, "abc"},
      {"d/four", CpioEntry::Kind::file, 0600, "1234"}, {"console", CpioEntry::Kind::char_device, 0600, {}, 5, 1},
      {"empty", CpioEntry::Kind::file, 0644, {}},
  };
  const std::string archive = newc_archive(entries);
  const auto records = testing::parse_newc(archive);
  REQUIRE(records.size() == entries.size());
  CHECK(records.at("d").mode == (S_IFDIR | 0755));
  CHECK(records.at("d").nlink == 2);
  CHECK(records.at("d/f").mode == (S_IFREG | 0640));
  CHECK(records.at("d/f").data == "abc");
  CHECK(records.at("d/four").data == "1234");
  CHECK(records.at("console").mode == (S_IFCHR | 0600));
  CHECK(records.at("console").rdev_major == 5);
  CHECK(records.at("console").rdev_minor == 1);
  CHECK(records.at("empty").size == 0);
  // Distinct inode numbers: the unpacker treats records with one inode number as hard links.
  std::set<uint32_t> inos;
  for (const auto& [name, r] : records) inos.insert(r.ino);
  CHECK(inos.size() == records.size());
  CHECK(newc_archive(entries) == archive);  // the same bytes every time
}

TEST_CASE("newc archive: busybox cpio lists and extracts what was written") {
  const auto busybox = testing::find_program("busybox");
  if (!busybox) {
    testing::skip("busybox is not installed (package busybox-static)");
    return;
  }
  testing::TempDir dir;
  const std::vector<CpioEntry> entries = {
      {"bin", CpioEntry::Kind::directory, 0755, {}},
      {"bin/tool", CpioEntry::Kind::file, 0755, std::string("\177ELF\0\1\2", 7)},
      {"init", CpioEntry::Kind::file, 0755, "#!/bin/sh\necho hi\n"},
  };
  const std::string archive = write_temp(dir.path() / "a.cpio", newc_archive(entries));
  const auto listing = testing::run_command({busybox->string(), "cpio", "-t", "-F", archive});
  CHECK_MESSAGE(listing.exit_code == 0, listing.output);
  CHECK(listing.output.starts_with("bin\nbin/tool\ninit\n"));  // then "1 blocks" on stderr
  const fs::path out = dir.path() / "out";
  fs::create_directory(out);
  // busybox cpio extracts into the working directory; the paths go in as arguments, never as script.
  const auto extracted =
      testing::run_command({busybox->string(), "sh", "-c", "cd \"$1\" && exec \"$2\" cpio -i -d -F \"$3\"", "sh",
                            out.string(), busybox->string(), archive});
  REQUIRE_MESSAGE(extracted.exit_code == 0, extracted.output);
  CHECK(testing::read_text_file(out / "init") == "#!/bin/sh\necho hi\n");
  CHECK(testing::read_text_file(out / "bin/tool") == entries[1].data);
  CHECK((fs::status(out / "init").permissions() & fs::perms::owner_exec) != fs::perms::none);
}

// An ELF64 header whose program headers (at 64, 56 bytes each) have the given types.
std::string elf_with_program_headers(const std::vector<uint32_t>& types) {
  std::string image(64 + 56 * types.size(), '\0');
  image.replace(0, 5, "\177ELF\2");
  const auto put = [&](std::size_t at, uint64_t value, std::size_t size) {
    for (std::size_t i = 0; i < size; ++i) image[at + i] = static_cast<char>((value >> (8 * i)) & 0xff);
  };
  put(0x20, 64, 8);            // e_phoff
  put(0x36, 56, 2);            // e_phentsize
  put(0x38, types.size(), 2);  // e_phnum
  for (std::size_t i = 0; i < types.size(); ++i) put(64 + 56 * i, types[i], 4);
  return image;
}

TEST_CASE("a static executable has no PT_INTERP, and a truncated one is not static") {
  constexpr uint32_t kLoad = 1, kInterp = 3;
  CHECK(is_static_elf(elf_with_program_headers({kLoad, kLoad})));
  CHECK_FALSE(is_static_elf(elf_with_program_headers({kLoad, kInterp})));
  const auto whole = elf_with_program_headers({kLoad, kLoad});
  CHECK_FALSE(is_static_elf(whole.substr(0, whole.size() - 10)));  // a program header cut off
  CHECK_FALSE(is_static_elf("#!/bin/sh\n" + std::string(100, ' ')));
  std::string elf32 = whole;
  elf32[4] = 1;  // ELFCLASS32
  CHECK_FALSE(is_static_elf(elf32));
}

TEST_CASE("the newest kernel in a boot directory is chosen by version order") {
  testing::TempDir dir;
  for (const char* name : {"vmlinuz-6.1.0-9-amd64", "vmlinuz-6.1.0-10-amd64", "config-6.1.0-11-amd64"}) {
    write_temp(dir.path() / name, "kernel");
  }
  fs::create_directory(dir.path() / "vmlinuz-6.1.0-12-amd64");  // a directory is no kernel
  CHECK(newest_boot_kernel(dir.path()) == dir.path() / "vmlinuz-6.1.0-10-amd64");
  testing::TempDir empty;
  CHECK_FALSE(newest_boot_kernel(empty.path()).has_value());
}

TEST_CASE("a missing or dynamic busybox and a missing kernel name the package and the option") {
  testing::TempDir dir;
  write_temp(dir.path() / "kernel", "kernel");
  const auto no_busybox = build_guest_image(dir.path(), {dir.path() / "kernel", dir.path() / "busybox"}, "init");
  REQUIRE_FALSE(no_busybox.ok());
  CHECK(no_busybox.error().code == ErrorCode::not_found);
  CHECK(no_busybox.error().message.find("busybox-static") != std::string::npos);
  CHECK(no_busybox.error().message.find("--busybox") != std::string::npos);

  const auto no_kernel = build_guest_image(dir.path(), {dir.path() / "vmlinuz-none", "/bin/busybox"}, "init");
  REQUIRE_FALSE(no_kernel.ok());
  CHECK(no_kernel.error().message.find("--kernel " + (dir.path() / "vmlinuz-none").string()) == 0);

  const auto dynamic = write_temp(dir.path() / "dynamic", elf_with_program_headers({1, 3}));
  const auto refused = build_guest_image(dir.path(), {dir.path() / "kernel", dynamic}, "init");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("not a static") != std::string::npos);
}

TEST_CASE(
    "the probe takes the seed's modules from the kernel's directory, built-in ones aside, or says which is missing") {
  testing::TempDir dir;
  const auto kernel = write_temp(dir.path() / "vmlinuz-6.1.0-test", "kernel");
  const auto modules = dir.path() / "modules" / "6.1.0-test";
  fs::create_directories(modules);
  // scsi_common and scsi_mod built in; the rest as files, isofs missing at first.
  write_temp(modules / "modules.builtin", "kernel/drivers/scsi/scsi_common.ko\nkernel/drivers/scsi/scsi_mod.ko\n");
  for (const char* module :
       {"kernel/drivers/ata/libata.ko", "kernel/drivers/ata/libahci.ko", "kernel/drivers/ata/ahci.ko",
        "kernel/drivers/cdrom/cdrom.ko", "kernel/drivers/scsi/sr_mod.ko"}) {
    fs::create_directories((modules / module).parent_path());
    write_temp(modules / module, std::string("module ") + module);
  }
  GuestImageSources sources{kernel, "/bin/busybox", dir.path() / "modules"};
  auto image = build_guest_image(dir.path(), sources, "init");
  if (!image.ok()) {
    testing::skip("no static busybox here: " + image.error().message);
    return;
  }
  CHECK(image->seed_modules_missing ==
        "kernel/fs/isofs/isofs.ko is neither in " + modules.string() + " (.ko or .ko.xz) nor built in");
  CHECK(testing::parse_newc(testing::read_text_file(image->initrd)).count("lib/modules/2-libata.ko") == 0);
  fs::create_directories(modules / "kernel/fs/isofs");
  write_temp(modules / "kernel/fs/isofs/isofs.ko", "module isofs");
  image = build_guest_image(dir.path(), sources, "init");
  REQUIRE(image.ok());
  CHECK(image->seed_modules_missing.empty());
  const auto records = testing::parse_newc(testing::read_text_file(image->initrd));
  CHECK(records.count("lib/modules/0-scsi_common.ko") == 0);  // built in
  CHECK(records.at("lib/modules/2-libata.ko").data == "module kernel/drivers/ata/libata.ko");
  CHECK(records.at("lib/modules/7-isofs.ko").data == "module isofs");
  // In load order: the probe's glob takes them as named.
  CHECK(records.count("lib/modules/4-ahci.ko") == 1);
  // As 6.12 ships them: isofs.ko.xz, decompressed into the image; a broken one is said so.
  fs::remove(modules / "kernel/fs/isofs/isofs.ko");
  write_temp(modules / "kernel/fs/isofs/isofs.ko.xz", "not xz");
  image = build_guest_image(dir.path(), sources, "init");
  REQUIRE(image.ok());
  CHECK(image->seed_modules_missing.find("isofs.ko.xz is not a whole xz stream") != std::string::npos);
  fs::remove(modules / "kernel/fs/isofs/isofs.ko.xz");
  write_temp(modules / "kernel/fs/isofs/isofs.ko", "module isofs, compressed");
  REQUIRE(testing::run_command({"xz", "--check=crc32", modules.string() + "/kernel/fs/isofs/isofs.ko"}).exit_code == 0);
  REQUIRE(fs::exists(modules / "kernel/fs/isofs/isofs.ko.xz"));
  image = build_guest_image(dir.path(), sources, "init");
  REQUIRE(image.ok());
  CHECK(image->seed_modules_missing.empty());
  CHECK(testing::parse_newc(testing::read_text_file(image->initrd)).at("lib/modules/7-isofs.ko").data ==
        "module isofs, compressed");
}

TEST_CASE("the probe image built on this host holds a static busybox, the probe's /init and a console") {
  testing::TempDir dir;
  const auto image = build_guest_image(dir.path(), {}, probe_init_script());
  if (!image.ok()) {
    testing::skip("the probe image cannot be built here: " + image.error().message);
    return;
  }
  CHECK(image->kernel == dir.path() / "vmlinuz");
  CHECK(fs::file_size(image->kernel) > 1'000'000);
  CHECK(fs::status(image->initrd).permissions() == fs::perms(0644));
  CHECK(image->cmdline.find("console=ttyS0") != std::string::npos);
  CHECK(image->cmdline.find(" no_timer_check") != std::string::npos);
  const auto records = testing::parse_newc(testing::read_text_file(image->initrd));
  CHECK(records.at("init").data == probe_init_script());
  CHECK(records.at("init").mode == (S_IFREG | 0755));
  CHECK(is_static_elf(records.at("bin/busybox").data));
  CHECK(records.at("dev/console").mode == (S_IFCHR | 0600));
  CHECK(records.at("dev/console").rdev_major == 5);
}

}  // namespace
}  // namespace hostagent::verify
