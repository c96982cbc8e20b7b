// Bounds on what one request may carry. See request_limits.h.
#include "rpc/request_limits.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/unknown_field_set.h>

#include <vector>

namespace meshrl::rpc {

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

std::string too_long(const std::string& path, size_t got, size_t limit) {
  return path + " is " + std::to_string(got) + " bytes, the limit is " + std::to_string(limit);
}

int64_t repeated_limit(const FieldDescriptor& f, const RequestLimits& limits) {
  if (f.name() == "rollouts") return limits.max_audit_rollouts;
  return kMaxOtherRepeated;
}

// Depth-first over the set fields of `m`; `path` names `m` ("JoinRequest", "AuditAnswer.rollouts[3]").
std::string check_message(const Message& m, const std::string& path, const RequestLimits& limits) {
  const Reflection& r = *m.GetReflection();
  const google::protobuf::UnknownFieldSet& unknown = r.GetUnknownFields(m);
  if (!unknown.empty()) {
    std::string bytes;
    unknown.SerializeToString(&bytes);
    if (bytes.size() > kMaxUnknownFieldBytes)
      return path + " carries " + std::to_string(bytes.size()) + " bytes of fields this build does not know, the limit is " +
             std::to_string(kMaxUnknownFieldBytes) + " (a node of another protocol version?)";
  }
  std::vector<const FieldDescriptor*> fields;
  r.ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    const std::string at = path + "." + f->name();
    const bool text = f->cpp_type() == FieldDescriptor::CPPTYPE_STRING;
    const bool nested = f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    if (f->is_repeated()) {
      const int64_t n = r.FieldSize(m, f);
      const int64_t cap = repeated_limit(*f, limits);
      if (n > cap) return at + " has " + std::to_string(n) + " elements, the limit is " + std::to_string(cap);
      for (int i = 0; i < n; ++i) {
        const std::string item = at + "[" + std::to_string(i) + "]";
        if (text) {
          std::string scratch;
          const std::string& s = r.GetRepeatedStringReference(m, f, i, &scratch);
          if (const size_t lim = field_byte_limit(f->name()); s.size() > lim) return too_long(item, s.size(), lim);
        } else if (nested) {
          if (std::string why = check_message(r.GetRepeatedMessage(m, f, i), item, limits); !why.empty()) return why;
        }
      }
      continue;
    }
    if (text) {
      std::string scratch;
      const std::string& s = r.GetStringReference(m, f, &scratch);
      if (const size_t lim = field_byte_limit(f->name()); s.size() > lim) return too_long(at, s.size(), lim);
    } else if (nested) {
      if (std::string why = check_message(r.GetMessage(m, f), at, limits); !why.empty()) return why;
    }
  }
  return {};
}

}  // namespace

size_t field_byte_limit(std::string_view field) {
  if (field == "name") return kMaxNameBytes;
  if (field == "device") return kMaxDeviceBytes;
  if (field == "run_id") return kMaxRunIdBytes;
  if (field == "model_config_hash" || field == "hash") return kMaxHashTextBytes;
  if (field == "signing_key" || field == "payload_hash" || field == "signature" || field == "scored_digest" ||
      field == "completion_hash")
    return kMaxBinaryBytes;
  if (field == "completion") return kMaxCompletionBytes;
  return kMaxOtherFieldBytes;
}

std::string check_request(const Message& request, const RequestLimits& limits) {
  return check_message(request, request.GetDescriptor()->name(), limits);
}

}  // namespace meshrl::rpc
