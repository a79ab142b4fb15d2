# xcargo_catch_tags(TARGET PREFIX LABELS ENV): one ctest per Catch2 tag of TARGET, found by
# asking the built binary (--list-tags), so that a new tag cannot escape the test run. Test
# cases without a tag get a test of their own (PREFIX.untagged). LABELS and ENV are lists
# given to every such test. Like Catch2's catch_discover_tests, but per tag: the tests of one
# tag share their fixtures and fail together.
function(xcargo_catch_tags target prefix labels env)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${target}_tags.cmake)
  set(wrapper ${CMAKE_CURRENT_BINARY_DIR}/${target}_tags_include.cmake)
  string(REPLACE ";" "," labels "${labels}")
  string(REPLACE ";" "|" env "${env}")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:${target}> -DOUT=${out} -DPREFIX=${prefix} -DLABELS=${labels} -DENV=${env}
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/catch_tags_add.cmake
    BYPRODUCTS ${out} VERBATIM)
  file(WRITE ${wrapper}
    "if(EXISTS \"${out}\")\n  include(\"${out}\")\nelse()\n  add_test(${prefix}.NOT_BUILT ${prefix}.NOT_BUILT)\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${wrapper})
endfunction()
