// hostagentd: the daemon. Until the daemon issue lands it only reports its version.
#include <CLI/CLI.hpp>
#include <iostream>

#include "hostagent/daemon/build_info.hpp"

int main(int argc, char** argv) {
  CLI::App app{"hostagentd: the hostagent daemon"};
  app.set_version_flag("--version", hostagent::version_string("hostagentd"));
  CLI11_PARSE(app, argc, argv);
  std::cout << hostagent::version_string("hostagentd") << "\n";
  return 0;
}
