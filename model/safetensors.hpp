// safetensors files, written and read by hand (the format is small): an 8-byte
// little-endian header length N, N bytes of JSON header
//   {"__metadata__": {"key": "value", ...},
//    "layers.3.attn.qkv.weight": {"dtype": "F32", "shape": [192, 64],
//                                 "data_offsets": [BEGIN, END]}, ...}
// (padded with spaces to a multiple of 8), then the tensors' raw little-endian
// bytes, offsets relative to the end of the header. The checkpoint stores each
// layer's parameters and optimizer moments this way, named by global layer path,
// so that any pipeline depth can load them. No LibTorch here: plain floats.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace bamboo {

struct tensor_record {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> data; // row-major, prod(shape) values
};

struct safetensors_file {
  std::map<std::string, std::string> metadata;
  std::vector<tensor_record> tensors; // in file order
};

// Where a tensor lies in a file, without its values.
struct tensor_layout {
  std::string name;
  std::vector<std::int64_t> shape;
  std::size_t count; // prod(shape) floats
};

// The 8-byte length and the padded JSON header for tensors stored in this order;
// their data follows it, back to back.
std::string safetensors_header(const std::map<std::string, std::string>& metadata,
                               const std::vector<tensor_layout>& tensors);
// The file's bytes: header and data.
std::vector<std::uint8_t> encode_safetensors(const safetensors_file& f);
// Parses and checks the bytes: header length within the file, a well-formed
// header, dtype F32, each tensor's offsets inside the data and matching its
// shape, no two tensors overlapping. nullopt and `error` (one line) otherwise.
std::optional<safetensors_file> decode_safetensors(const std::vector<std::uint8_t>& bytes,
                                                   std::string& error);

// Atomically: a temporary file beside `path`, fsync, rename, fsync of the
// directory; on failure (a full disk, say) the temporary file is removed and a
// file already at `path` is untouched.
bool write_file_atomically(const std::string& path,
                           const std::vector<std::uint8_t>& bytes, std::string& error);
// The same for a file made of parts written back to back, straight from where they
// lie; with `sha256`, the hex SHA-256 of the whole file, computed as it is written.
struct byte_span {
  const void* data;
  std::size_t size;
};
bool write_file_atomically(const std::string& path, const std::vector<byte_span>& parts,
                           std::string* sha256, std::string& error);
std::string sha256_hex(const std::vector<std::uint8_t>& bytes);
bool write_safetensors(const std::string& path, const safetensors_file& f,
                       std::string& error);
std::optional<safetensors_file> read_safetensors(const std::string& path,
                                                 std::string& error);

// The strict JSON subset safetensors headers and checkpoint manifests use:
// objects, arrays, strings (ASCII escapes) and non-negative integers of at
// most 18 digits, nested at most 8 deep.
struct json_value {
  enum kind_t { string, integer, array, object } kind = string;
  std::string text;
  std::uint64_t number = 0;
  std::vector<json_value> items;
  std::vector<std::pair<std::string, json_value>> members;
};
std::optional<json_value> parse_json(const std::string& text, std::string& error);
std::string json_quoted(const std::string& s); // with quotes, escaped

// A JSON object of string values (a version 1 checkpoint manifest), read with the same
// strict reader as safetensors headers; nullopt and `error` otherwise.
std::optional<std::map<std::string, std::string>>
parse_string_object(const std::string& json, std::string& error);
std::string format_string_object(const std::map<std::string, std::string>& values);

} // namespace bamboo
