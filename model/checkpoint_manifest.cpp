#include "model/checkpoint_manifest.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <mutex>

#include <map>
#include <set>

#include "model/safetensors.hpp"

namespace bamboo {

namespace {

constexpr const char* format_name = "bamboo-checkpoint";
constexpr const char* format_v1 = "bamboo-checkpoint-1";

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= s.size() && !s.empty()) {
    const auto comma = s.find(',', at);
    out.push_back(
        s.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  return out;
}

// An object's members by name, each once.
std::optional<std::map<std::string, const json_value*>>
members(const json_value& v, const std::string& what, std::string& error) {
  if (v.kind != json_value::object) {
    error = what + " is not a JSON object";
    return std::nullopt;
  }
  std::map<std::string, const json_value*> out;
  for (const auto& [k, x] : v.members)
    if (!out.emplace(k, &x).second) {
      error = what + " has '" + k + "' twice";
      return std::nullopt;
    }
  return out;
}

class fields {
public:
  fields(std::map<std::string, const json_value*> m, std::string what, std::string& error)
      : m_(std::move(m)), what_(std::move(what)), error_(error) {}
  std::optional<std::uint64_t> number(const std::string& key) {
    auto it = m_.find(key);
    if (it == m_.end() || it->second->kind != json_value::integer)
      return bad(key, "a number");
    return it->second->number;
  }
  std::optional<std::string> text(const std::string& key) {
    auto it = m_.find(key);
    if (it == m_.end() || it->second->kind != json_value::string)
      return bad(key, "a string");
    return it->second->text;
  }
  const json_value* get(const std::string& key) const {
    auto it = m_.find(key);
    return it == m_.end() ? nullptr : it->second;
  }

private:
  std::nullopt_t bad(const std::string& key, const char* kind) {
    if (error_.empty())
      error_ =
          what_ + ": '" + key + "' is " + (m_.count(key) ? "not " : "missing, ") + kind;
    return std::nullopt;
  }
  std::map<std::string, const json_value*> m_;
  std::string what_;
  std::string& error_;
};

std::optional<parsed_manifest> version_2(fields& f, std::string& error) {
  parsed_manifest p;
  p.version = 2;
  auto step = f.number("step");
  auto seed = f.number("seed");
  auto cursor = f.number("cursor");
  auto generation = f.number("generation");
  auto tensors = f.number("tensors");
  auto plan = f.text("plan");
  auto config = f.text("config");
  const auto* files = f.get("files");
  const auto* mac = f.get("mac"); // optional: a run without a user's token
  if (mac && mac->kind != json_value::string) {
    error = "'mac' is not a string";
    return std::nullopt;
  }
  if (!error.empty())
    return std::nullopt;
  if (!files || files->kind != json_value::array) {
    error = "'files' is not a list";
    return std::nullopt;
  }
  p.m.step = static_cast<std::int64_t>(*step);
  p.m.seed = *seed;
  p.m.cursor = static_cast<std::int64_t>(*cursor);
  p.m.generation = *generation;
  p.m.plan = *plan;
  p.m.config = *config;
  p.tensors = *tensors;
  p.m.mac = mac ? mac->text : "";
  for (const auto& item : files->items) {
    auto m = members(item, "a file", error);
    if (!m)
      return std::nullopt;
    fields ff(std::move(*m), "a file", error);
    auto name = ff.text("name");
    auto sha = ff.text("sha256");
    auto bytes = ff.number("bytes");
    auto count = ff.number("tensors");
    if (!error.empty())
      return std::nullopt;
    p.m.files.push_back({*name, *sha, *bytes, *count});
  }
  return p;
}

std::optional<parsed_manifest> version_1(const std::string& text, std::string& error) {
  auto m = parse_string_object(text, error);
  if (!m)
    return std::nullopt;
  auto field = [&](const std::string& key) {
    return m->count(key) ? m->at(key) : std::string();
  };
  parsed_manifest p;
  p.version = 1;
  auto number = [&](const std::string& key) -> std::optional<std::int64_t> {
    auto n = decimal_number(field(key));
    if (!n && error.empty())
      error = "'" + key + "' is not a number: '" + field(key) + "'";
    return n;
  };
  auto step = number("step");
  auto tensors = number("tensors");
  if (!step || !tensors)
    return std::nullopt;
  p.m.step = *step;
  p.tensors = static_cast<std::uint64_t>(*tensors);
  p.m.config = field("config");
  p.m.plan = field("plan");
  p.m.seed = static_cast<std::uint64_t>(decimal_number(field("seed")).value_or(0));
  p.m.cursor = decimal_number(field("cursor")).value_or(0);
  p.m.generation =
      static_cast<std::uint64_t>(decimal_number(field("generation")).value_or(0));
  for (const auto& name : split_commas(field("files"))) {
    auto bytes = number(name + ".bytes");
    if (!bytes)
      return std::nullopt;
    p.m.files.push_back(
        {name, field(name + ".sha256"), static_cast<std::uint64_t>(*bytes), 0});
  }
  return p;
}

} // namespace

std::optional<std::int64_t> decimal_number(const std::string& text) {
  if (text.empty() || text.size() > 18 ||
      text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoll(text);
}

std::string format_manifest(const checkpoint_manifest& m) {
  std::uint64_t tensors = 0;
  std::string files;
  for (const auto& f : m.files) {
    files += std::string(files.empty() ? "" : ",") +
             "\n    {\"name\": " + json_quoted(f.file) +
             ", \"sha256\": " + json_quoted(f.sha256) +
             ", \"bytes\": " + std::to_string(f.bytes) +
             ", \"tensors\": " + std::to_string(f.tensors) + "}";
    tensors += f.tensors;
  }
  return "{\n  \"format\": " + json_quoted(format_name) +
         ",\n  \"version\": " + std::to_string(manifest_version) +
         ",\n  \"step\": " + std::to_string(m.step) +
         ",\n  \"seed\": " + std::to_string(m.seed) +
         ",\n  \"cursor\": " + std::to_string(m.cursor) +
         ",\n  \"generation\": " + std::to_string(m.generation) +
         ",\n  \"plan\": " + json_quoted(m.plan) +
         ",\n  \"config\": " + json_quoted(m.config) +
         ",\n  \"tensors\": " + std::to_string(tensors) + ",\n  \"files\": [" + files +
         "\n  ]" + (m.mac.empty() ? "" : ",\n  \"mac\": " + json_quoted(m.mac)) + "\n}\n";
}

std::optional<parsed_manifest> parse_manifest(const std::string& text,
                                              std::string& error) {
  auto root = parse_json(text, error);
  if (!root)
    return std::nullopt;
  auto m = members(*root, "the manifest", error);
  if (!m)
    return std::nullopt;
  fields f(*m, "the manifest", error);
  const auto* format = f.get("format");
  if (!format || format->kind != json_value::string) {
    error = "no format named";
    return std::nullopt;
  }
  std::optional<parsed_manifest> p;
  if (format->text == format_v1) {
    p = version_1(text, error);
  } else if (format->text != format_name) {
    error =
        "not a " + std::string(format_name) + " manifest (format '" + format->text + "')";
    return std::nullopt;
  } else {
    auto version = f.number("version");
    if (!version)
      return std::nullopt;
    if (*version != manifest_version) {
      error = "format version " + std::to_string(*version) +
              ": this build reads versions 1 and " + std::to_string(manifest_version);
      return std::nullopt;
    }
    p = version_2(f, error);
  }
  if (!p)
    return std::nullopt;
  std::set<std::string> names;
  for (const auto& file : p->m.files)
    if (!names.insert(file.file).second) {
      error = "the file " + file.file + " is listed twice";
      return std::nullopt;
    }
  return p;
}

namespace {
std::mutex key_mutex;
std::vector<std::uint8_t> key; // empty: checkpoints unkeyed

// Each value length-prefixed, in a fixed order: no two manifests share a message.
void append(std::vector<std::uint8_t>& out, const std::string& s) {
  for (int i = 0; i < 8; ++i)
    out.push_back(
        static_cast<std::uint8_t>(static_cast<std::uint64_t>(s.size()) >> (8 * i)));
  out.insert(out.end(), s.begin(), s.end());
}

std::vector<std::uint8_t> hmac(const std::vector<std::uint8_t>& k,
                               const std::vector<std::uint8_t>& msg) {
  std::vector<std::uint8_t> mac(EVP_MAX_MD_SIZE);
  unsigned int len = 0;
  HMAC(EVP_sha256(), k.data(), static_cast<int>(k.size()), msg.data(), msg.size(),
       mac.data(), &len);
  mac.resize(len);
  return mac;
}
} // namespace

void key_checkpoints(const std::string& token) {
  std::lock_guard<std::mutex> lock(key_mutex);
  key.clear();
  if (token.empty())
    return;
  // A key of its own, not the token: a manifest's digest proves nothing else.
  const std::string label = "bamboo-checkpoint-key";
  key = hmac(std::vector<std::uint8_t>(token.begin(), token.end()),
             std::vector<std::uint8_t>(label.begin(), label.end()));
}

bool checkpoints_keyed() {
  std::lock_guard<std::mutex> lock(key_mutex);
  return !key.empty();
}

std::string manifest_mac(const checkpoint_manifest& m) {
  std::lock_guard<std::mutex> lock(key_mutex);
  if (key.empty())
    return "";
  std::vector<std::uint8_t> msg;
  append(msg, "bamboo-checkpoint-manifest");
  for (const auto n : {static_cast<std::uint64_t>(m.step), m.seed,
                       static_cast<std::uint64_t>(m.cursor), m.generation})
    append(msg, std::to_string(n));
  append(msg, m.plan);
  append(msg, m.config);
  append(msg, std::to_string(m.files.size()));
  for (const auto& f : m.files) {
    append(msg, f.file);
    append(msg, f.sha256);
    append(msg, std::to_string(f.bytes));
    append(msg, std::to_string(f.tensors));
  }
  const auto mac = hmac(key, msg);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (auto b : mac)
    out += {hex[b >> 4], hex[b & 15]};
  return out;
}

std::optional<std::string> check_manifest_mac(const checkpoint_manifest& m) {
  if (!checkpoints_keyed())
    return std::nullopt;
  if (m.mac.empty())
    return "no keyed digest ('mac'), and this run keys its checkpoints with its "
           "cluster token (was it written by a run without --token-file or "
           "$BAMBOO_TOKEN?)";
  const auto want = manifest_mac(m);
  if (m.mac.size() != want.size() ||
      CRYPTO_memcmp(m.mac.data(), want.data(), want.size()) != 0)
    return "its keyed digest ('mac') does not match its values: edited, a file "
           "substituted, or written under another cluster token";
  return std::nullopt;
}

} // namespace bamboo
