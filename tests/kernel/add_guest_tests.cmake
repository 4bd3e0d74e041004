# Run after the guest program is built (POST_BUILD): lists its test cases and writes a CTest file
# that adds one test per case, "PREFIXNAME", running kernel_result on the boot fixture's log.
# Variables: GUEST (the program), RESULT (kernel_result), RUN_DIR, PREFIX ("kernel:"), FIXTURE (the
# boot's), OUTPUT (the file to write).
execute_process(COMMAND "${GUEST}" --list-test-cases OUTPUT_VARIABLE listing RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${GUEST} --list-test-cases failed (${status}):\n${listing}")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(script "")
foreach(line IN LISTS lines)
  if(line STREQUAL "" OR line MATCHES "^\\[doctest\\]" OR line MATCHES "^=====")
    continue()
  endif()
  # Bracket arguments keep spaces, quotes and commas of a name as they are.
  string(APPEND script "add_test([==[${PREFIX}${line}]==] [==[${RESULT}]==] [==[${RUN_DIR}]==] [==[${line}]==])\n"
         "set_tests_properties([==[${PREFIX}${line}]==] PROPERTIES FIXTURES_REQUIRED ${FIXTURE} LABELS [==[kernel;tree:default]==] "
         "SKIP_REGULAR_EXPRESSION [==[SKIPPED: ]==] TIMEOUT 60)\n")
endforeach()
file(WRITE "${OUTPUT}" "${script}")
