# House warnings (bubblewrap's list plus a few); see docs/architecture.md "Build".
add_compile_options(
  -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wvla
  -Wswitch-enum -Werror=implicit-function-declaration -Werror=incompatible-pointer-types
  -Werror=return-type)
if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
  # A goto over a cleanup variable runs the cleanup on garbage; gcc only warns with this.
  add_compile_options(-Werror=jump-misses-init)
endif()
if(SBX_WERROR)
  add_compile_options(-Werror)
endif()
