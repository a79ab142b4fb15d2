# Writes a C++ source defining NAME (bytes) and NAME_SIZE from a binary file, at build time.
# usage: cmake -DINPUT=file -DOUTPUT=file.cpp -DNAME=symbol -P embed.cmake
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" len)
math(EXPR size "${len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n" body "${body}")
file(WRITE "${OUTPUT}" "// Generated from ${INPUT} by libcargo/embed.cmake. Do not edit.\n"
  "#include <cstddef>\nnamespace xcargo {\nextern const unsigned char ${NAME}[];\nextern const size_t ${NAME}Size;\n"
  "const unsigned char ${NAME}[] = {\n${body}\n};\nconst size_t ${NAME}Size = ${size};\n}  // namespace xcargo\n")
