#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "model/safetensors.hpp"
#include "tests/run_command.hpp"
#include "tests/scratch_dir.hpp"

using namespace bamboo;
using bamboo::test::scratch_dir;

namespace {

// Values a float holds exactly, whose sums are exact too.
safetensors_file sample_file() {
  safetensors_file f;
  f.metadata["step"] = "6";
  f.metadata["model"] = "gpt \"tiny\"";
  tensor_record w{"layers.3.attn.qkv.weight", {2, 3}, {}};
  for (int i = 0; i < 6; ++i)
    w.data.push_back(0.5f * static_cast<float>(i) - 1.0f);
  tensor_record m{"layers.3.attn.qkv.weight#exp_avg", {6}, {0.25f, 0, 0, 0, 0, -0.125f}};
  tensor_record b{"layers.3.attn.qkv.bias", {3}, {7, 8, 9}};
  f.tensors = {w, m, b};
  return f;
}

std::vector<std::uint8_t> bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

} // namespace

TEST_CASE("a safetensors file reads back with every tensor, shape, value and "
          "metadata entry",
          "[model]") {
  const scratch_dir dir;
  const auto path = dir.file("s.safetensors");
  std::string error;
  REQUIRE(write_safetensors(path, sample_file(), error));
  auto bytes = bytes_of(path);
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<std::uint64_t>(bytes[i]) << (8 * i);
  CHECK(n % 8 == 0); // the data starts aligned
  CHECK(bytes.size() == 8 + n + 4 * (6 + 6 + 3));
  auto back = read_safetensors(path, error);
  INFO(error);
  REQUIRE(back);
  CHECK(back->metadata == sample_file().metadata);
  REQUIRE(back->tensors.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(back->tensors[i].name == sample_file().tensors[i].name);
    CHECK(back->tensors[i].shape == sample_file().tensors[i].shape);
    CHECK(back->tensors[i].data == sample_file().tensors[i].data);
  }
}

TEST_CASE("a Python reader that knows only the format finds the tensors and values "
          "the C++ side wrote",
          "[model]") {
  const scratch_dir dir;
  const auto path = dir.file("py.safetensors");
  std::string error;
  REQUIRE(write_safetensors(path, sample_file(), error));
  auto r =
      bamboo::test::run_command(std::string("/usr/bin/python3 ") + BAMBOO_SOURCE_DIR +
                                "/tests/model/read_safetensors.py " + path);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output == "layers.3.attn.qkv.weight 2x3 6 -1.0 1.5 1.5\n"
                    "layers.3.attn.qkv.weight#exp_avg 6 6 0.25 -0.125 0.125\n"
                    "layers.3.attn.qkv.bias 3 3 7.0 9.0 24.0\n"
                    "meta model=gpt \"tiny\"\n"
                    "meta step=6\n");
}

TEST_CASE("truncated, corrupted and inconsistent safetensors files are refused in "
          "one line",
          "[model]") {
  auto good = encode_safetensors(sample_file());
  std::string error;
  auto refused = [&](std::vector<std::uint8_t> b, const std::string& needle) {
    error.clear();
    CHECK_FALSE(decode_safetensors(b, error));
    INFO(error);
    CHECK(error.find(needle) != std::string::npos);
    CHECK(error.find('\n') == std::string::npos);
  };
  refused({1, 2, 3}, "truncated");
  refused(std::vector<std::uint8_t>(good.begin(), good.end() - 4), "outside the");
  auto huge = good;
  huge[5] = 0x7f;
  refused(huge, "the header is said to be");
  auto garbled = good;
  garbled[8] = 'x'; // the header's opening brace
  refused(garbled, "header JSON");
  auto text = std::string(good.begin(), good.end());
  auto replace = [&](const std::string& from, const std::string& to) {
    auto s = text;
    s.replace(s.find(from), from.size(), to);
    return std::vector<std::uint8_t>(s.begin(), s.end());
  };
  refused(replace("\"F32\"", "\"F16\""), "only F32");
  refused(replace("\"shape\":[3]", "\"shape\":[4]"), "bytes for 4 floats");
  refused(replace("\"data_offsets\":[48,60]", "\"data_offsets\":[44,56]"),
          "overlaps another tensor");
}

TEST_CASE("a symbolic link planted where a temporary file was named is never followed",
          "[model]") {
  const scratch_dir dir, elsewhere;
  const auto victim = elsewhere.file("victim");
  std::ofstream(victim) << "untouched";
  const auto path = dir.file("stage-0.safetensors");
  std::filesystem::create_symlink(victim, path + ".tmp");
  std::string error;
  REQUIRE(write_safetensors(path, sample_file(), error));
  std::ifstream in(victim);
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  CHECK(text == "untouched");
  CHECK(std::filesystem::is_symlink(path + ".tmp")); // left as planted
}

TEST_CASE("a failed write leaves the previous file whole and no temporary behind",
          "[model]") {
  const scratch_dir dir;
  const auto path = dir.file("keep.safetensors");
  std::string error;
  REQUIRE(write_safetensors(path, sample_file(), error));
  const auto before = bytes_of(path);
  // A write that fails midway (a file size limit of 16 bytes).
  {
    rlimit old{};
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    const auto sigxfsz = std::signal(SIGXFSZ, SIG_IGN);
    rlimit tiny{16, old.rlim_max};
    REQUIRE(setrlimit(RLIMIT_FSIZE, &tiny) == 0);
    const bool written = write_safetensors(path, sample_file(), error);
    setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, sigxfsz);
    CHECK_FALSE(written);
  }
  CHECK(error.find("cannot write") != std::string::npos);
  CHECK(bytes_of(path) == before);
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    INFO(e.path());
    CHECK(e.path().filename() == "keep.safetensors");
    ++files;
  }
  CHECK(files == 1);
  CHECK_FALSE(
      write_safetensors(dir.file("no/such/dir/x.safetensors"), sample_file(), error));
  CHECK(bytes_of(path) == before);
}

namespace {
// A header of the sample file with one of its texts replaced (the shape of
// the first tensor, say), the header length fixed up to match.
std::vector<std::uint8_t> with_header_text(const std::vector<std::uint8_t>& file,
                                           const std::string& from,
                                           const std::string& to) {
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<std::uint64_t>(file[i]) << (8 * i);
  std::string header(file.begin() + 8, file.begin() + 8 + static_cast<long>(n));
  const auto at = header.find(from);
  if (at != std::string::npos)
    header.replace(at, from.size(), to);
  std::vector<std::uint8_t> out(8);
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<std::uint8_t>(header.size() >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), file.begin() + 8 + static_cast<long>(n), file.end());
  return out;
}
} // namespace

TEST_CASE("crafted safetensors headers - shapes whose product overflows, huge numbers "
          "and hundreds of random mutations - are refused with a message and never "
          "abort",
          "[model]") {
  const auto good = encode_safetensors(sample_file());
  std::string error;
  // [2^31, 2^31] floats: 2^64 bytes, which wraps to 0 in 64 bits.
  for (const std::string& shape :
       {"[2147483648,2147483648]", "[4294967296,4294967296,4]",
        "[1099511627776,1099511627776]", "[0,2147483648,2147483648,2147483648]"}) {
    auto crafted = with_header_text(good, "[2,3]", shape);
    error.clear();
    INFO(shape);
    CHECK_FALSE(decode_safetensors(crafted, error));
    CHECK_FALSE(error.empty());
  }
  // Random mutations of the header and the length: refused or read, never a
  // throw (an abort would end the test binary).
  std::uint64_t seed = 88172645463325252ull;
  auto next = [&] {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
  };
  int refused = 0;
  const std::vector<std::string> numbers{
      "18446744073709551615", "9223372036854775808", "4294967296", "-1", "1e308",
      "99999999999999999999"};
  for (int i = 0; i < 400; ++i) {
    auto bytes = good;
    switch (i % 4) {
    case 0: // flip bytes anywhere in the length or the header
      for (int k = 0; k < 1 + static_cast<int>(next() % 4); ++k)
        bytes[next() % std::min<std::size_t>(bytes.size(), 200)] ^=
            static_cast<std::uint8_t>(1 + next() % 255);
      break;
    case 1: // a number of the header replaced by a huge one
      bytes = with_header_text(good, std::to_string(next() % 10),
                               numbers[next() % numbers.size()]);
      break;
    case 2: // truncated
      bytes.resize(next() % bytes.size());
      break;
    default: // the length field itself
      for (int k = 0; k < 8; ++k)
        bytes[k] = static_cast<std::uint8_t>(next());
    }
    error.clear();
    std::optional<safetensors_file> f;
    REQUIRE_NOTHROW(f = decode_safetensors(bytes, error));
    if (!f) {
      ++refused;
      CHECK_FALSE(error.empty());
    }
  }
  CHECK(refused > 300);
}
