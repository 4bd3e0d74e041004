// The layering test: the source tree keeps to the layers docs/architecture.md draws, and the
// checker itself finds each kind of problem in trees made to have it.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "layer_rules.hpp"
#include "test_support.hpp"

namespace hostagent::testing::layering {
namespace {

namespace fs = std::filesystem;

const std::string kRules = R"(
<!-- layers -->
| Layer | Paths | May include |
|-------|-------|-------------|
| base | `common/` | |
| pure | `numa/`, `numa/src/discovery.cpp` | base |
| adapters | `vfio/`, `numa/src/discovery.cpp.in` | base, pure |
| app | `daemon/` | base, pure, adapters |
<!-- end layers -->

<!-- debts -->
| File | Includes | Removed by |
|------|----------|------------|
| `vfio/src/binder.cpp` | `hostagent/daemon/ledger.hpp` | moving the ledger |
<!-- end debts -->
)";

Rules rules() {
  auto parsed = parse_rules(kRules);
  REQUIRE_MESSAGE(parsed.ok(), parsed.error().message);
  return std::move(parsed).value();
}

// A tree that keeps to kRules: each layer including only what it may, and the debt owed.
void write_clean_tree(const fs::path& root) {
  write_text_file(root / "common/include/hostagent/common/result.hpp", "#pragma once\n");
  write_text_file(root / "numa/include/hostagent/numa/model.hpp", "#include \"hostagent/common/result.hpp\"\n");
  write_text_file(root / "numa/src/model.cpp", "#include \"hostagent/numa/model.hpp\"\n#include <vector>\n");
  write_text_file(root / "vfio/src/binder.hpp", "#include \"hostagent/numa/model.hpp\"\n");
  write_text_file(root / "vfio/src/binder.cpp",
                  "#include \"binder.hpp\"\n  #  include \"hostagent/daemon/ledger.hpp\"  // owed\n");
  write_text_file(root / "daemon/include/hostagent/daemon/ledger.hpp", "#include \"hostagent/common/result.hpp\"\n");
  write_text_file(root / "daemon/src/ledger.cpp",
                  "#include \"hostagent/daemon/ledger.hpp\"\n#include \"../../vfio/src/binder.hpp\"\n");
  write_text_file(root / "build/unity_0.cxx", "#include \"anything/at/all.hpp\"\n");  // a build tree: not scanned
  write_text_file(root / "docs/notes.md", "#include \"not/a/source.hpp\"\n");
}

TEST_CASE("the source tree keeps to the layers docs/architecture.md draws") {
  const auto markdown = read_text_file(source_dir() / "docs" / "architecture.md");
  auto parsed = parse_rules(markdown);
  REQUIRE_MESSAGE(parsed.ok(), parsed.error().message);
  CHECK(parsed->layers.size() >= 6);
  const auto problems = check_tree(source_dir(), *parsed);
  for (const auto& problem : problems) FAIL_CHECK(problem);
  // The layers the issue names are there, each with what it may include.
  CHECK(layer_of(*parsed, "numa/src/placement.cpp") == "pure");
  CHECK(layer_of(*parsed, "discovery/src/discovery.cpp") == "adapters");
  CHECK(layer_of(*parsed, "service/include/hostagent/service/vm_service.hpp") == "service");
  CHECK(layer_of(*parsed, "api/rest/src/routes.cpp") == "api");
  CHECK(layer_of(*parsed, "hostagent/daemon/src/create_vm.cpp") == "application");
  CHECK(layer_of(*parsed, "hostagent/hostagentd/assembly.cpp") == "programs");
  // Nothing crosses the wrong way any more: the debts table is empty, and stays so.
  CHECK(parsed->debts.empty());
}

// docs/architecture.md's tables, as the checks of the real tree read them.
Rules tree_rules() {
  auto parsed = parse_rules(read_text_file(source_dir() / "docs" / "architecture.md"));
  REQUIRE_MESSAGE(parsed.ok(), parsed.error().message);
  return std::move(parsed).value();
}

TEST_CASE("the libraries link only what their layers may include, and only what their files include") {
  const auto problems = check_links(source_dir(), tree_rules());
  for (const auto& problem : problems) FAIL_CHECK(problem);
}

TEST_CASE("each library's files declare the namespace of the folder its headers are published in") {
  const auto problems = check_namespaces(source_dir(), tree_rules());
  for (const auto& problem : problems) FAIL_CHECK(problem);
}

TEST_CASE("a tree that keeps to the rules has no problem, and the longest path decides a file's layer") {
  TempDir dir;
  write_clean_tree(dir.path());
  const auto checked = rules();
  const auto problems = check_tree(dir.path(), checked);
  CHECK_MESSAGE(problems.empty(), (problems.empty() ? "" : problems.front()));
  CHECK(layer_of(checked, "numa/src/discovery.cpp") == "pure");
  CHECK(layer_of(checked, "numa/src/discovery.cpp.in") == "adapters");
  CHECK(layer_of(checked, "numa") == "");
  CHECK(layer_of(checked, "tests/x.cpp") == "");
}

TEST_CASE("the checker names a forbidden include, a file in no layer, an unknown or ambiguous include, a debt paid") {
  TempDir dir;
  write_clean_tree(dir.path());
  // pure reaching an adapter; a source outside every layer; includes naming no file, and two.
  write_text_file(dir.path() / "numa/src/placement.cpp", "#include \"binder.hpp\"\n#include \"gone.hpp\"\n");
  write_text_file(dir.path() / "tools/extra.cpp", "\n");
  write_text_file(dir.path() / "vfio/src/more/binder.hpp", "\n");
  write_text_file(dir.path() / "vfio/src/binder.cpp", "#include \"binder.hpp\"\n");  // the debt paid
  const auto problems = check_tree(dir.path(), rules());
  CAPTURE(problems);
  const auto has = [&](const std::string& text) {
    return std::any_of(problems.begin(), problems.end(), [&](const std::string& p) { return contains(p, text); });
  };
  CHECK(has("tools/extra.cpp is in no layer"));
  CHECK(has("numa/src/placement.cpp: \"gone.hpp\" names no file of the tree"));
  CHECK(has("numa/src/placement.cpp: \"binder.hpp\" could be any of vfio/src/binder.hpp, vfio/src/more/binder.hpp"));
  CHECK(has("debt paid: vfio/src/binder.cpp no longer includes \"hostagent/daemon/ledger.hpp\""));
  CHECK(problems.size() == 4);

  fs::remove(dir.path() / "vfio/src/more/binder.hpp");
  const auto forbidden = check_tree(dir.path(), rules());
  CAPTURE(forbidden);
  CHECK(std::any_of(forbidden.begin(), forbidden.end(), [](const std::string& p) {
    return p == "numa/src/placement.cpp (pure) includes \"binder.hpp\" (adapters): pure may include only pure, base";
  }));
}

// Libraries of kRules' layers: numa (pure) publishes a header that includes common's; vfio
// (adapters) uses numa in its source only, and links it so.
void write_linked_tree(const fs::path& root) {
  write_text_file(root / "common/CMakeLists.txt",
                  "add_library(hostagent_common src/result.cpp)\n"
                  "target_include_directories(hostagent_common PUBLIC include)  # (a comment)\n");
  write_text_file(root / "common/include/hostagent/common/result.hpp", "#pragma once\n");
  write_text_file(root / "common/src/result.cpp", "#include \"hostagent/common/result.hpp\"\n");
  write_text_file(root / "numa/CMakeLists.txt",
                  "add_library(hostagent_numa\n  src/model.cpp)\ntarget_include_directories(hostagent_numa PUBLIC "
                  "include)\ntarget_link_libraries(hostagent_numa PUBLIC hostagent_common PRIVATE Boost::json)\n");
  write_text_file(root / "numa/include/hostagent/numa/model.hpp", "#include \"hostagent/common/result.hpp\"\n");
  write_text_file(root / "numa/src/model.cpp", "#include \"hostagent/numa/model.hpp\"\n");
  write_text_file(root / "vfio/CMakeLists.txt",
                  "set(here src)\nadd_library(hostagent_vfio ${here}/binder.cpp)\n"
                  "target_include_directories(hostagent_vfio PUBLIC include PRIVATE src)\n"
                  "target_link_libraries(hostagent_vfio PRIVATE hostagent_numa)\n");
  write_text_file(root / "vfio/include/hostagent/vfio/binder.hpp", "#pragma once\n");
  write_text_file(root / "vfio/src/binder.cpp",
                  "#include \"hostagent/vfio/binder.hpp\"\n#include \"hostagent/numa/model.hpp\"\n");
}

TEST_CASE("the link checker names a forbidden link, a link nothing needs and a PUBLIC link no public header needs") {
  TempDir dir;
  write_linked_tree(dir.path());
  const auto clean = check_links(dir.path(), rules());
  CHECK_MESSAGE(clean.empty(), (clean.empty() ? "" : clean.front()));

  // pure linking an adapter; an adapter publishing what only its source uses; a link nothing includes.
  write_text_file(dir.path() / "numa/CMakeLists.txt",
                  "add_library(hostagent_numa src/model.cpp)\ntarget_include_directories(hostagent_numa PUBLIC "
                  "include)\ntarget_link_libraries(hostagent_numa PUBLIC hostagent_common PRIVATE hostagent_vfio)\n");
  write_text_file(
      dir.path() / "vfio/CMakeLists.txt",
      "add_library(hostagent_vfio src/binder.cpp)\ntarget_include_directories(hostagent_vfio PUBLIC include)\n"
      "target_link_libraries(hostagent_vfio hostagent_numa PRIVATE hostagent_common)\n");
  const auto problems = check_links(dir.path(), rules());
  CAPTURE(problems);
  CHECK(problems == std::vector<std::string>{
                        "numa/CMakeLists.txt: hostagent_numa (pure) links hostagent_vfio (adapters): pure may link "
                        "only pure, base",
                        "vfio/CMakeLists.txt: hostagent_vfio (adapters) links hostagent_numa PUBLIC, yet none of its "
                        "public headers includes a header of it: link it PRIVATE",
                        "vfio/CMakeLists.txt: hostagent_vfio (adapters) links hostagent_common, yet none of its files "
                        "includes a header of it: drop the link"});
}

TEST_CASE("the namespace checker names a file declaring another library's namespace") {
  TempDir dir;
  write_linked_tree(dir.path());
  write_text_file(dir.path() / "common/src/result.cpp", "namespace hostagent::text {\n}  // common: hostagent's own\n");
  write_text_file(dir.path() / "numa/src/model.cpp", "namespace hostagent::numa::detail {\n}\n");
  CHECK(check_namespaces(dir.path(), rules()).empty());
  // vfio's source in numa's namespace; its public header in a namespace of no library.
  write_text_file(dir.path() / "vfio/src/binder.cpp",
                  "#include \"hostagent/vfio/binder.hpp\"\nnamespace hostagent::numa {\n}\n");
  write_text_file(dir.path() / "vfio/include/hostagent/vfio/binder.hpp", "  namespace hostagent {\n}\n");
  CHECK(check_namespaces(dir.path(), rules()) ==
        std::vector<std::string>{"vfio/include/hostagent/vfio/binder.hpp: namespace hostagent, yet hostagent_vfio "
                                 "publishes its headers as hostagent/vfio/: declare hostagent::vfio (or one inside it)",
                                 "vfio/src/binder.cpp: namespace hostagent::numa, yet hostagent_vfio publishes its "
                                 "headers as hostagent/vfio/: declare hostagent::vfio (or one inside it)"});
}

TEST_CASE("malformed tables are refused, naming the line") {
  const auto refused = [](const std::string& markdown, const std::string& why) {
    CAPTURE(why);
    const auto parsed = parse_rules(markdown);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().code == ErrorCode::parse_error);
    CHECK_MESSAGE(contains(parsed.error().message, why), parsed.error().message);
  };
  const std::string head = "<!-- layers -->\n| Layer | Paths | May include |\n|---|---|---|\n";
  const std::string debts = "<!-- debts -->\n| File | Includes | Removed by |\n|---|---|---|\n<!-- end debts -->\n";
  refused(head + "| base | `common/` |\n<!-- end layers -->\n" + debts, "architecture.md:4: a layer row has 3 cells");
  refused(head + "| base | `common/` | pure |\n<!-- end layers -->\n" + debts, "\"pure\" is no layer of the table");
  refused(head + "| a | `x/` | |\n| b | `x/` | |\n<!-- end layers -->\n" + debts, ":5: `x/` is in layer a already");
  refused(head + "| a | x/ | |\n<!-- end layers -->\n" + debts, "a layer needs a name and `paths`");
  refused(head + "| a | `x/` | |\n<!-- end layers -->\n", "no \"<!-- debts\" table");
  refused(head +
              "| a | `x/` | |\n<!-- end layers -->\n<!-- debts -->\n| F | I | R |\n|---|---|---|\n| `x/a.cpp` | "
              "`y.hpp` | |\n<!-- end debts -->\n",
          "a debt names one `file`, one `include` and what removes it");
}

}  // namespace
}  // namespace hostagent::testing::layering
