// The tests' main: doctest's, with SIGPIPE ignored as hostagentd ignores it. libvirt's client
// writes to libvirtd's socket, and a write after libvirtd went away (the restart tests) must fail
// with EPIPE, not kill the process.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <csignal>

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  return doctest::Context(argc, argv).run();
}
