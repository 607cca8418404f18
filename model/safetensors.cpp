#include "model/safetensors.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>

namespace bamboo {

namespace {

std::string hex(const unsigned char* bytes, unsigned n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < n; ++i) {
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 15];
  }
  return out;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

class json_reader {
public:
  explicit json_reader(const std::string& s) : s_(s) {}

  std::optional<json_value> document(std::string& error) {
    auto v = value();
    skip();
    if (v && i_ != s_.size())
      fail("text after the header's object");
    if (!error_.empty()) {
      error = "header JSON: " + error_;
      return std::nullopt;
    }
    return v;
  }

private:
  void skip() {
    while (i_ < s_.size() &&
           (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
      ++i_;
  }
  std::nullopt_t fail(const std::string& why) {
    if (error_.empty())
      error_ = why + " at byte " + std::to_string(i_);
    return std::nullopt;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  std::optional<json_value> value() {
    if (++depth_ > 8)
      return fail("nested too deep");
    skip();
    if (i_ >= s_.size())
      return fail("unexpected end");
    std::optional<json_value> out;
    const char c = s_[i_];
    if (c == '{')
      out = object();
    else if (c == '[')
      out = array();
    else if (c == '"')
      out = string_value();
    else if (c >= '0' && c <= '9')
      out = integer();
    else
      return fail("unexpected character");
    --depth_;
    return out;
  }
  std::optional<json_value> string_value() {
    json_value v;
    if (!eat('"'))
      return fail("expected a string");
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\') {
        if (i_ >= s_.size())
          return fail("unfinished escape");
        char e = s_[i_++];
        if (e == 'u') {
          if (i_ + 4 > s_.size())
            return fail("unfinished escape");
          const auto code = std::strtoul(s_.substr(i_, 4).c_str(), nullptr, 16);
          i_ += 4;
          if (code > 0x7f)
            return fail("a non-ASCII escape");
          c = static_cast<char>(code);
        } else if (e == 'n') {
          c = '\n';
        } else if (e == 't') {
          c = '\t';
        } else {
          c = e;
        }
      }
      v.text += c;
    }
    if (i_ >= s_.size())
      return fail("unfinished string");
    ++i_;
    return v;
  }
  std::optional<json_value> integer() {
    json_value v;
    v.kind = json_value::integer;
    std::size_t digits = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      if (++digits > 18)
        return fail("a number too large");
      v.number = v.number * 10 + static_cast<std::uint64_t>(s_[i_++] - '0');
    }
    return v;
  }
  std::optional<json_value> array() {
    json_value v;
    v.kind = json_value::array;
    eat('[');
    if (eat(']'))
      return v;
    do {
      auto item = value();
      if (!item)
        return std::nullopt;
      v.items.push_back(std::move(*item));
    } while (eat(','));
    if (!eat(']'))
      return fail("expected ']'");
    return v;
  }
  std::optional<json_value> object() {
    json_value v;
    v.kind = json_value::object;
    eat('{');
    if (eat('}'))
      return v;
    do {
      skip();
      auto key = string_value();
      if (!key)
        return std::nullopt;
      if (!eat(':'))
        return fail("expected ':'");
      auto item = value();
      if (!item)
        return std::nullopt;
      v.members.emplace_back(key->text, std::move(*item));
    } while (eat(','));
    if (!eat('}'))
      return fail("expected '}'");
    return v;
  }

  const std::string& s_;
  std::size_t i_ = 0;
  int depth_ = 0;
  std::string error_;
};

const json_value* member(const json_value& obj, const char* key) {
  for (const auto& [k, v] : obj.members)
    if (k == key)
      return &v;
  return nullptr;
}

} // namespace

std::string safetensors_header(const std::map<std::string, std::string>& metadata,
                               const std::vector<tensor_layout>& tensors) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      header += (first ? "" : ",") + quoted(k) + ":" + quoted(v);
      first = false;
    }
    header += "}";
  }
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (header.size() > 1)
      header += ",";
    std::string shape;
    for (auto d : t.shape)
      shape += (shape.empty() ? "" : ",") + std::to_string(d);
    const auto end = offset + 4 * t.count;
    header += quoted(t.name) + ":{\"dtype\":\"F32\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(end) + "]}";
    offset = end;
  }
  header += "}";
  while (header.size() % 8 != 0)
    header += ' ';
  std::string out(8, '\0');
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<char>(n >> (8 * i));
  return out + header;
}

std::string sha256_hex(const std::vector<std::uint8_t>& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr);
  return hex(md, n);
}

std::vector<std::uint8_t> encode_safetensors(const safetensors_file& f) {
  std::vector<tensor_layout> layout;
  std::size_t data_size = 0;
  for (const auto& t : f.tensors) {
    layout.push_back({t.name, t.shape, t.data.size()});
    data_size += 4 * t.data.size();
  }
  const auto header = safetensors_header(f.metadata, layout);
  std::vector<std::uint8_t> out(header.size() + data_size);
  std::memcpy(out.data(), header.data(), header.size());
  auto* data = out.data() + header.size();
  for (const auto& t : f.tensors) { // x86 and ARM are little-endian, as the format
    std::memcpy(data, t.data.data(), 4 * t.data.size());
    data += 4 * t.data.size();
  }
  return out;
}

std::optional<safetensors_file> decode_safetensors(const std::vector<std::uint8_t>& bytes,
                                                   std::string& error) {
  if (bytes.size() < 8) {
    error =
        "truncated: " + std::to_string(bytes.size()) + " bytes, not even a header length";
    return std::nullopt;
  }
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<std::uint64_t>(bytes[i]) << (8 * i);
  if (n > bytes.size() - 8 || n > (std::uint64_t{100} << 20)) {
    error = "truncated or corrupt: the header is said to be " + std::to_string(n) +
            " bytes, the file has " + std::to_string(bytes.size() - 8) +
            " after the length";
    return std::nullopt;
  }
  const std::string text(reinterpret_cast<const char*>(bytes.data()) + 8, n);
  auto root = json_reader(text).document(error);
  if (!root)
    return std::nullopt;
  if (root->kind != json_value::object) {
    error = "header JSON: not an object";
    return std::nullopt;
  }
  const std::uint64_t data_size = bytes.size() - 8 - n;
  const auto* data = bytes.data() + 8 + n;
  safetensors_file f;
  std::set<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& [name, v] : root->members) {
    auto bad = [&, name = name](const std::string& why) {
      error = "tensor '" + name + "': " + why;
      return std::nullopt;
    };
    if (name == "__metadata__") {
      if (v.kind != json_value::object)
        return bad("metadata is not an object");
      for (const auto& [k, mv] : v.members) {
        if (mv.kind != json_value::string)
          return bad("metadata values must be strings");
        f.metadata[k] = mv.text;
      }
      continue;
    }
    const auto* dtype = v.kind == json_value::object ? member(v, "dtype") : nullptr;
    const auto* shape = v.kind == json_value::object ? member(v, "shape") : nullptr;
    const auto* offs = v.kind == json_value::object ? member(v, "data_offsets") : nullptr;
    if (!dtype || !shape || !offs || shape->kind != json_value::array ||
        offs->kind != json_value::array || offs->items.size() != 2)
      return bad("wants dtype, shape and two data_offsets");
    if (dtype->kind != json_value::string || dtype->text != "F32")
      return bad("dtype " + dtype->text + ", only F32 is read");
    tensor_record t;
    t.name = name;
    std::uint64_t count = 1;
    for (const auto& d : shape->items) {
      if (d.kind != json_value::integer || d.number > (1ull << 40))
        return bad("a bad dimension");
      t.shape.push_back(static_cast<std::int64_t>(d.number));
      // Checked: a shape whose product overflows (or outgrows the file) is
      // refused before anything is allocated for it.
      if (__builtin_mul_overflow(count, d.number, &count) || count > data_size / 4)
        return bad("shape elements more than the file's " + std::to_string(data_size) +
                   " bytes of data hold");
    }
    const auto begin = offs->items[0].number, end = offs->items[1].number;
    if (offs->items[0].kind != json_value::integer ||
        offs->items[1].kind != json_value::integer || begin > end || end > data_size)
      return bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                 ") outside the " + std::to_string(data_size) +
                 " bytes of data (a truncated file?)");
    if (end - begin != 4 * count)
      return bad(std::to_string(end - begin) + " bytes for " + std::to_string(count) +
                 " floats");
    auto next = ranges.lower_bound({begin, 0});
    if ((next != ranges.end() && next->first < end && begin != end) ||
        (next != ranges.begin() && std::prev(next)->second > begin))
      return bad("overlaps another tensor's data");
    ranges.insert({begin, end});
    t.data.resize(count);
    std::memcpy(t.data.data(), data + begin, end - begin);
    f.tensors.push_back(std::move(t));
  }
  return f;
}

bool write_file_atomically(const std::string& path,
                           const std::vector<std::uint8_t>& bytes, std::string& error) {
  return write_file_atomically(path, {{bytes.data(), bytes.size()}}, nullptr, error);
}

bool write_file_atomically(const std::string& path, const std::vector<byte_span>& parts,
                           std::string* sha256, std::string& error) {
  // A fresh, uniquely named temporary file (O_EXCL): a name planted in a shared
  // directory, a symbolic link say, is never opened, let alone truncated.
  std::string tmp = path + ".XXXXXX.tmp";
  int fd = ::mkostemps(tmp.data(), 4, O_CLOEXEC);
  if (fd < 0) {
    error = "cannot create " + tmp + ": " + std::strerror(errno);
    return false;
  }
  ::fchmod(fd, 0644); // mkostemps makes it 0600: as readable as a plain file
  // Hashed as written: one pass over the snapshot, no copy of the file in memory.
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> md(EVP_MD_CTX_new(),
                                                        EVP_MD_CTX_free);
  if (sha256)
    EVP_DigestInit_ex(md.get(), EVP_sha256(), nullptr);
  for (const auto& part : parts) {
    const auto* bytes = static_cast<const std::uint8_t*>(part.data);
    if (sha256)
      EVP_DigestUpdate(md.get(), bytes, part.size);
    std::size_t done = 0;
    while (done < part.size) {
      auto w = ::write(fd, bytes + done, part.size - done);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0) {
        error = "cannot write " + tmp + ": " + std::strerror(w < 0 ? errno : ENOSPC);
        ::close(fd);
        ::unlink(tmp.c_str());
        return false;
      }
      done += static_cast<std::size_t>(w);
    }
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    error = "cannot flush " + tmp + ": " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    error = "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  // The rename itself survives a crash once the directory is on disk.
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  if (sha256) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(md.get(), digest, &n);
    *sha256 = hex(digest, n);
  }
  return true;
}

bool write_safetensors(const std::string& path, const safetensors_file& f,
                       std::string& error) {
  return write_file_atomically(path, encode_safetensors(f), error);
}

std::optional<safetensors_file> read_safetensors(const std::string& path,
                                                 std::string& error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot read " + path;
    return std::nullopt;
  }
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
  auto f = decode_safetensors(bytes, error);
  if (!f)
    error = path + ": " + error;
  return f;
}

std::optional<json_value> parse_json(const std::string& text, std::string& error) {
  return json_reader(text).document(error);
}

std::string json_quoted(const std::string& s) {
  return quoted(s);
}

std::optional<std::map<std::string, std::string>>
parse_string_object(const std::string& json, std::string& error) {
  auto root = json_reader(json).document(error);
  if (!root)
    return std::nullopt;
  if (root->kind != json_value::object) {
    error = "not a JSON object";
    return std::nullopt;
  }
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : root->members) {
    if (v.kind != json_value::string) {
      error = "'" + k + "' is not a string";
      return std::nullopt;
    }
    out[k] = v.text;
  }
  return out;
}

std::string format_string_object(const std::map<std::string, std::string>& values) {
  std::string out = "{\n";
  bool first = true;
  for (const auto& [k, v] : values) {
    out += (first ? "  " : ",\n  ") + quoted(k) + ": " + quoted(v);
    first = false;
  }
  return out + "\n}\n";
}

} // namespace bamboo
