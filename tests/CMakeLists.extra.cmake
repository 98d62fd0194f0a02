# Extra tests owned by the ACP code generator (tools/gen_acp.py).

# The generated sources are checked in; this test fails when they are out of
# date with respect to the schema or the generator.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME gen_acp_check
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tools/gen_acp.py
                   --check --schema-dir
                   ${PROJECT_SOURCE_DIR}/spec/acp/schema/v1)
  set_tests_properties(gen_acp_check PROPERTIES TIMEOUT 120)
endif()
