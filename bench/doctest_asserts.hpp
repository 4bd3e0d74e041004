// bench/doctest_asserts: the tests' support libraries assert with doctest; a benchmark that runs them
// in its own main (bench_kernel_vfs, bench_start) routes those assertions to its own failure.
#pragma once

#include <doctest/doctest.h>

#include <string>

namespace hostagent::bench {

template <void (*Fail)(const std::string&)>
void route_doctest_asserts(doctest::Context& context) {
  context.setAsDefaultForAssertsOutOfTestCases();
  context.setAssertHandler([](const doctest::AssertData& data) {
    Fail(std::string("assertion failed at ") + data.m_file + ":" + std::to_string(data.m_line) + ": " +
         data.m_decomp.c_str());
  });
}

}  // namespace hostagent::bench
