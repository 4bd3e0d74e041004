// vmtemplates extends and loading from disk: how a child lays over its parents, where errors in a
// chain point, and the order in which files and directories override each other.
#include <doctest/doctest.h>

#include "hostagent/vmtemplates/vm_template.hpp"
#include "test_support.hpp"

namespace hostagent::vmtemplates {
namespace {

namespace fs = std::filesystem;

// Parents from memory: NAME -> text, reported as NAME.yaml.
ParentLookup parents(std::map<std::string, std::string> texts) {
  return [texts = std::move(texts)](const std::string& name) -> Result<std::pair<std::string, std::string>> {
    const auto it = texts.find(name);
    if (it == texts.end()) return Error{ErrorCode::not_found, "no template " + name};
    return std::pair{it->second, name + ".yaml"};
  };
}

VmTemplate valid(const std::string& yaml, const ParentLookup& lookup) {
  auto shape = parse_template(yaml, "child.yaml", lookup);
  REQUIRE_MESSAGE(shape.ok(), (shape.ok() ? "" : shape.error().message));
  return *shape;
}

Error failure(const std::string& yaml, const ParentLookup& lookup) {
  auto shape = parse_template(yaml, "child.yaml", lookup);
  REQUIRE_FALSE(shape.ok());
  return shape.error();
}

const std::string kBase =
    "name: base\n"
    "abstract: true\n"
    "description: the base\n"
    "vcpus: 8\n"
    "memory: 16GiB\n"
    "gpus: {count: 2, model: H100}\n"
    "nics:\n"
    "  vfs_per_gpu: 1\n"
    "  vf: {trust: true, mtu: 9000}\n"
    "peer_to_peer: true\n"
    "metadata: {family: gx3, tier: gold}\n";

TEST_CASE("extends: the child's keys override, mappings merge key by key, own keys are not inherited") {
  const VmTemplate shape = valid(
      "name: child\n"
      "extends: base\n"
      "vcpus: 16\n"
      "gpus: {count: 4}\n"
      "nics: {vf: {vlan: 100}}\n"
      "metadata: {tier: silver, owner: ml}\n",
      parents({{"base", kBase}}));
  CHECK(shape.name == "child");
  CHECK(shape.description.empty());  // describes the base, not this shape
  CHECK_FALSE(shape.abstract);
  CHECK(shape.source == "child.yaml");
  CHECK(shape.vcpus == 16);
  CHECK(shape.memory_bytes == 16ULL << 30);
  CHECK(shape.gpus.count == 4);
  CHECK(shape.gpus.model == "H100");
  CHECK(shape.nics.vfs_per_gpu == 1);
  CHECK(shape.nics.vf.trust == std::optional<bool>(true));
  CHECK(shape.nics.vf.mtu == 9000);
  CHECK(shape.nics.vf.vlan == 100);
  CHECK(shape.peer_to_peer);
  CHECK(shape.metadata == std::map<std::string, std::string>{{"family", "gx3"}, {"tier", "silver"}, {"owner", "ml"}});
}

TEST_CASE("extends: a null in the child removes the parent's key, and other kinds replace") {
  const VmTemplate shape = valid(
      "name: child\n"
      "extends: base\n"
      "gpus: {model: ~, ids: [10de:2335]}\n"
      "nics: ~\n"
      "guest_numa: {cells: 2}\n"
      "metadata: {tier: null}\n",
      parents({{"base", kBase + "guest_numa: mirror\n"}}));
  CHECK(shape.gpus.model.empty());
  CHECK(shape.gpus.ids == std::vector<PciId>{{0x10de, 0x2335}});
  CHECK(shape.gpus.count == 2);
  CHECK(shape.nics.vfs_per_gpu == 0);
  CHECK_FALSE(shape.nics.vf.mtu.has_value());
  CHECK_FALSE(shape.guest_numa.mirror);
  CHECK(shape.guest_numa.cells == 2);
  CHECK(shape.metadata == std::map<std::string, std::string>{{"family", "gx3"}});

  // And a selector the child adds beside an inherited one is a contradiction, pointed out in the child.
  const Error error = failure("name: child\nextends: base\ngpus: {device_id: 0x2335}\n", parents({{"base", kBase}}));
  CHECK(error.message ==
        "child.yaml:3:8: gpus.device_id: found a second GPU selector beside model, expected one of model, device_id "
        "(with vendor_id) or ids; write model: ~ to drop an inherited one");
}

TEST_CASE("extends: a child changes the inherited command line, and dropping the kernel strands its initrd") {
  const std::string base = kBase + "boot: {kernel: /boot/vmlinuz, initrd: /boot/initrd.img, cmdline: quiet}\n";
  const VmTemplate shape =
      valid("name: child\nextends: base\nboot: {cmdline: console=ttyS0}\n", parents({{"base", base}}));
  CHECK(shape.boot.kernel == "/boot/vmlinuz");
  CHECK(shape.boot.initrd == "/boot/initrd.img");
  CHECK(shape.boot.cmdline == "console=ttyS0");
  // The stranded values are the parent's: they are reported at their lines there.
  const Error error = failure("name: child\nextends: base\nboot: {kernel: ~}\n", parents({{"base", base}}));
  CHECK(error.message ==
        "base.yaml:12:39: boot.initrd: found \"/boot/initrd.img\" with no boot.kernel, expected boot.kernel beside "
        "it: QEMU loads an initrd and a command line only with a kernel it boots directly\n"
        "base.yaml:12:66: boot.cmdline: found \"quiet\" with no boot.kernel, expected boot.kernel beside it: QEMU "
        "loads an initrd and a command line only with a kernel it boots directly");
}

TEST_CASE("extends: chains merge from the farthest parent to the child, and the nearest value wins") {
  const auto lookup = parents({
      {"root", "name: root\nvcpus: 4\nmemory: 8GiB\nnvme: 1\nfirmware: bios\nmetadata: {a: root, b: root}\n"},
      {"middle", "name: middle\nextends: root\nnvme: 2\nmetadata: {b: middle, c: middle}\n"},
  });
  const VmTemplate shape = valid("name: leaf\nextends: middle\nvcpus: 6\nmetadata: {c: leaf}\n", lookup);
  CHECK(shape.vcpus == 6);
  CHECK(shape.memory_bytes == 8ULL << 30);
  CHECK(shape.nvme == 2);
  CHECK(shape.firmware == Firmware::bios);
  CHECK(shape.metadata == std::map<std::string, std::string>{{"a", "root"}, {"b", "middle"}, {"c", "leaf"}});
}

TEST_CASE("extends: problems in inherited keys point into the parent's file, after the child's") {
  const auto lookup = parents({{"base", "name: base\nvcpus: 4\nmemory: 8GiB\nnvme: lots\nfirmware: uefi\n"}});
  const Error error = failure("name: child\nextends: base\nmachine: pc\n", lookup);
  CHECK(error.code == ErrorCode::invalid_argument);
  CHECK(error.message ==
        "child.yaml:3:10: machine: found \"pc\", expected q35 or a pc-q35-* machine type: the guest's PCIe tree is "
        "built from pxb-pcie, which needs q35\n"
        "base.yaml:4:7: nvme: found \"lots\", expected a whole number 0..64\n"
        "base.yaml:5:11: firmware: found \"uefi\", expected efi or bios (did you mean \"efi\"?)");
  // A child that fixes the parent's value hides the parent's problem: only the merged shape counts.
  CHECK(valid("name: child\nextends: base\nnvme: 2\nfirmware: efi\n", lookup).nvme == 2);
}

TEST_CASE("extends: cycles are an error naming the chain") {
  const auto lookup = parents({
      {"a", "name: a\nextends: b\n"},
      {"b", "name: b\nextends: a\n"},
      {"self", "name: self\nextends: self\n"},
  });
  const Error cycle = failure("name: a\nextends: b\n", lookup);
  CHECK(cycle.code == ErrorCode::invalid_argument);
  CHECK(cycle.message == "b.yaml:2:10: extends: found a cycle a -> b -> a, expected a chain of parents that ends");
  CHECK(failure("name: c\nextends: a\n", lookup).message ==
        "b.yaml:2:10: extends: found a cycle c -> a -> b -> a, expected a chain of parents that ends");
  CHECK(failure("name: self\nextends: self\n", lookup).message ==
        "child.yaml:2:10: extends: found a cycle self -> self, expected a chain of parents that ends");
}

TEST_CASE("extends: a missing parent, a broken one, and a chain that does not end") {
  const Error missing = failure("name: child\nvcpus: 2\nextends: nope\n", parents({}));
  CHECK(missing.code == ErrorCode::not_found);
  CHECK(missing.message == "child.yaml:3:10: extends: found \"nope\", expected a parent template (no template nope)");

  CHECK(failure("name: child\nextends: base\n", parents({{"base", "name: base\nvcpus: [\n"}})).message ==
        "base.yaml:3:1: found invalid YAML (end of sequence flow not found), expected a mapping of template keys");
  CHECK(failure("name: child\nextends: base\nvcpus: 2\nmemory: 2G\n", parents({{"base", "- a\n"}})).message ==
        "base.yaml:1:1: found a list, expected a mapping of template keys");
  CHECK(failure("name: child\nextends: base\nvcpus: 2\nmemory: 2G\n", parents({{"base", "name: other\n"}})).message ==
        "base.yaml:1:7: name: found \"other\", expected \"base\", the name it was found by");

  // A lookup that invents a new parent every time would recurse for ever.
  const ParentLookup endless = [](const std::string& name) -> Result<std::pair<std::string, std::string>> {
    return std::pair{"name: " + name + "\nextends: " + name + "x\n", name + ".yaml"};
  };
  CHECK(failure("name: p\nextends: px\n", endless).message ==
        "pxxxxxxxxxxxxxxx.yaml:2:10: extends: found a chain of more than 16 templates, expected at most 16");
}

TEST_CASE("extends: a malformed extends is reported, and missing keys then are not") {
  CHECK(failure("name: child\nextends: ../base\n", parents({})).message ==
        "child.yaml:2:10: extends: found \"../base\", expected a name: use 1-64 letters, digits, '.', '_' or '-', not "
        "starting with '.' or '-'");
  CHECK(failure("name: child\nextends: [a, b]\nnvme: x\n", parents({})).message ==
        "child.yaml:2:10: extends: found a list, expected a name: use 1-64 letters, digits, '.', '_' or '-', not "
        "starting with '.' or '-'\n"
        "child.yaml:3:7: nvme: found \"x\", expected a whole number 0..64");
}

TEST_CASE("load_template_file: the name must be the file's, and parents come from beside it, then search_dirs") {
  const testing::TempDir tmp;
  const fs::path fleet = tmp.path() / "fleet";
  const fs::path mine = tmp.path() / "mine";
  testing::write_text_file(fleet / "base.yaml", "name: base\nabstract: true\nvcpus: 8\nmemory: 8GiB\n");
  testing::write_text_file(mine / "base.yaml", "name: base\nabstract: true\nvcpus: 2\nmemory: 4GiB\n");
  testing::write_text_file(mine / "small.yaml", "name: small\nextends: base\n");

  const auto beside = load_template_file(mine / "small.yaml", {});
  REQUIRE(beside.ok());
  CHECK(beside->vcpus == 2);
  CHECK(beside->source == (mine / "small.yaml").string());
  // The parent beside the file wins over one of the same name in the search path.
  const auto searched = load_template_file(mine / "small.yaml", {fleet});
  REQUIRE(searched.ok());
  CHECK(searched->vcpus == 2);
  testing::write_text_file(tmp.path() / "elsewhere" / "small.yaml", "name: small\nextends: base\n");
  const auto from_fleet = load_template_file(tmp.path() / "elsewhere" / "small.yaml", {fleet});
  REQUIRE(from_fleet.ok());
  CHECK(from_fleet->vcpus == 8);

  testing::write_text_file(mine / "orphan.yaml", "name: orphan\nextends: gone\n");
  const auto orphan = load_template_file(mine / "orphan.yaml", {fleet});
  REQUIRE_FALSE(orphan.ok());
  CHECK(orphan.error().code == ErrorCode::not_found);
  CHECK(orphan.error().message == (mine / "orphan.yaml").string() +
                                      ":2:10: extends: found \"gone\", expected a parent template (no gone.yaml in " +
                                      mine.string() + " or " + fleet.string() + ")");

  testing::write_text_file(mine / "renamed.yaml", "name: small\nvcpus: 2\nmemory: 2GiB\n");
  const auto renamed = load_template_file(mine / "renamed.yaml", {});
  REQUIRE_FALSE(renamed.ok());
  CHECK(renamed.error().message == (mine / "renamed.yaml").string() +
                                       ":1:7: name: found \"small\", expected \"renamed\", the file's name without "
                                       ".yaml: extends and overrides find templates by file name");
}

TEST_CASE("load_template_file: a bare file name finds its parent in the working directory, named as written") {
  const testing::TempDir tmp;
  testing::write_text_file(tmp.path() / "base.yaml", "name: base\nvcpus: 2\nmemory: 2GiB\nnvme: lots\n");
  testing::write_text_file(tmp.path() / "child.yaml", "name: child\nextends: base\n");
  const fs::path before = fs::current_path();
  fs::current_path(tmp.path());
  const auto shape = load_template_file("child.yaml", {});
  fs::current_path(before);
  REQUIRE_FALSE(shape.ok());
  CHECK(shape.error().message == "base.yaml:4:7: nvme: found \"lots\", expected a whole number 0..64");
}

TEST_CASE("load_template_file: files that cannot be read") {
  const testing::TempDir tmp;
  const auto missing = load_template_file(tmp.path() / "none.yaml", {});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::not_found);
  CHECK(missing.error().message == "read " + (tmp.path() / "none.yaml").string() + ": No such file or directory");

  fs::create_directories(tmp.path() / "dir.yaml");
  const auto directory = load_template_file(tmp.path() / "dir.yaml", {});
  REQUIRE_FALSE(directory.ok());
  CHECK(directory.error().code == ErrorCode::invalid_argument);
  CHECK(directory.error().message ==
        (tmp.path() / "dir.yaml").string() + ": found a directory, expected a template file");
}

TEST_CASE("load_template_dirs: later directories override earlier ones, parents included") {
  const testing::TempDir tmp;
  const fs::path shipped = tmp.path() / "shipped";
  const fs::path site = tmp.path() / "site";
  testing::write_text_file(shipped / "base.yaml", "name: base\nabstract: true\nmemory: 8GiB\nfirmware: efi\n");
  testing::write_text_file(shipped / "a.yaml", "name: a\nextends: base\nvcpus: 2\n");
  testing::write_text_file(shipped / "b.yaml", "name: b\nvcpus: 2\nmemory: 2GiB\n");
  testing::write_text_file(shipped / "c.yaml", "name: c\nvcpus: 2\nmemory: 2GiB\n");
  testing::write_text_file(shipped / "notes.txt", "not a template");
  testing::write_text_file(shipped / ".a.yaml.swp.yaml", "editor junk: [");
  testing::write_text_file(site / "base.yaml", "name: base\nabstract: true\nmemory: 16GiB\nfirmware: bios\n");
  testing::write_text_file(site / "b.yaml", "name: b\nvcpus: 4\nmemory: 4GiB\n");
  testing::write_text_file(site / "c.yaml", "name: c\nabstract: true\n");  // hides the shipped c

  const auto only_shipped = load_template_dirs({shipped});
  REQUIRE(only_shipped.ok());
  CHECK(only_shipped->size() == 3);
  CHECK(only_shipped->at("a").firmware == Firmware::efi);

  const auto loaded = load_template_dirs({shipped, site});
  REQUIRE_MESSAGE(loaded.ok(), (loaded.ok() ? "" : loaded.error().message));
  CHECK(loaded->size() == 2);
  CHECK(loaded->count("c") == 0);
  CHECK(loaded->at("b").vcpus == 4);
  CHECK(loaded->at("b").source == (site / "b.yaml").string());
  // The shipped a extends the site's base: a fleet changes its base once, for every shape.
  CHECK(loaded->at("a").memory_bytes == 16ULL << 30);
  CHECK(loaded->at("a").firmware == Firmware::bios);
}

TEST_CASE("load_template_dirs: an invalid template or a missing directory fails the load") {
  const testing::TempDir tmp;
  testing::write_text_file(tmp.path() / "good.yaml", "name: good\nvcpus: 2\nmemory: 2GiB\n");
  testing::write_text_file(tmp.path() / "bad.yaml", "name: bad\nvcpus: 0\nmemory: 2GiB\n");
  const auto loaded = load_template_dirs({tmp.path()});
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.error().message ==
        (tmp.path() / "bad.yaml").string() + ":2:8: vcpus: found 0, expected a whole number 1..1024");

  const auto missing = load_template_dirs({tmp.path() / "nowhere"});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::not_found);
  CHECK(missing.error().message == "template directory " + (tmp.path() / "nowhere").string() + " does not exist");
}

TEST_CASE(
    "directory_lookup: the first place with NAME.yaml, its path or its file name, and never a path of a non-name") {
  const testing::TempDir scratch;
  const testing::TempDir shipped_dir;
  const fs::path operator_dir = scratch.path() / "templates";
  testing::write_text_file(operator_dir / "base.yaml", "name: base\n");
  testing::write_text_file(shipped_dir.path() / "base.yaml", "name: shipped\n");
  testing::write_text_file(shipped_dir.path() / "only-shipped.yaml", "name: only-shipped\n");

  const auto by_path = directory_lookup({operator_dir, shipped_dir.path()});
  const auto first = by_path("base");
  REQUIRE(first.ok());
  CHECK(first->first == "name: base\n");
  CHECK(first->second == (operator_dir / "base.yaml").string());
  const auto later = by_path("only-shipped");
  REQUIRE(later.ok());
  CHECK(later->second == (shipped_dir.path() / "only-shipped.yaml").string());

  const auto by_file_name = directory_lookup({shipped_dir.path()}, ParentSource::file_name);
  REQUIRE(by_file_name("base").ok());
  CHECK(by_file_name("base")->second == "base.yaml");
  const auto missing = by_file_name("nothing");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::not_found);
  CHECK(missing.error().message.find(shipped_dir.path().string()) == std::string::npos);  // no host path shown

  // "../escaped" is templates/../escaped.yaml, which exists: refused as a name before it is a path.
  testing::write_text_file(scratch.path() / "escaped.yaml", "name: escaped\n");
  for (const std::string name : {"../escaped", ".hidden", "a/b", ""}) {
    CAPTURE(name);
    const auto refused = by_path(name);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == ErrorCode::invalid_argument);
    CHECK(refused.error().field == "extends");
  }
}

}  // namespace
}  // namespace hostagent::vmtemplates
