// Configure-time probe: does clang++ link -fsanitize=fuzzer here (libfuzzer-14-dev)?
#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t*, std::size_t) { return 0; }
