# One benchmark's command line (ctest bench.<name>.args): --help prints a usage line and exits 0;
# an unknown flag is refused with one line naming it and exit 2. Run with -DBENCH=<program>.
execute_process(COMMAND ${BENCH} --help RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 0 OR NOT out MATCHES "usage: ")
  message(FATAL_ERROR "${BENCH} --help: exit ${rc}, expected 0 and a usage line\n${out}${err}")
endif()
execute_process(COMMAND ${BENCH} --no-such-flag RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 2 OR NOT err MATCHES "--no-such-flag")
  message(FATAL_ERROR "${BENCH} --no-such-flag: exit ${rc}, expected 2 and a line naming the flag\n${out}${err}")
endif()
