# sbx_embed(OUT NAME IN): a C file at OUT that holds IN's bytes as `const unsigned char NAME[]`
# and `const size_t NAME_len` (made by embed.cmake at build time, rebuilt when IN changes).
function(sbx_embed out name in)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DIN=${in} -DOUT=${out} -DNAME=${name} -P
            ${PROJECT_SOURCE_DIR}/cmake/embed.cmake
    DEPENDS ${in} ${PROJECT_SOURCE_DIR}/cmake/embed.cmake
    VERBATIM)
endfunction()
