# Turn a file into a C array: cmake -DIN=file -DOUT=file.c -DNAME=symbol
#   -P embed.cmake. Defines `const char NAME[]` (NUL-terminated) and
# `const size_t NAME_len` (without the NUL). Used for the `acp trace --html`
# page, which is kept as a real HTML file so it can be edited and opened.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x..,){16})" "\\1\n" body "${body}")
get_filename_component(base "${IN}" NAME)
file(WRITE "${OUT}.tmp"
  "/* Generated from ${base} by cmake/embed.cmake. Do not edit. */\n"
  "#include <stddef.h>\n"
  "extern const char ${NAME}[];\n"
  "extern const size_t ${NAME}_len;\n"
  "const char ${NAME}[] = {\n${body}0x00};\n"
  "const size_t ${NAME}_len = ${len};\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
