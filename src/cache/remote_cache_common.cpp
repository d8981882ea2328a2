// What the remote tier shares between the builds with and without hiredis.

#include "cuinline/remote_cache.hpp"

namespace cuinline {

const char* to_string(RemoteEntryCheck check) noexcept {
  switch (check) {
    case RemoteEntryCheck::ok:
      return "ok";
    case RemoteEntryCheck::missing:
      return "missing";
    case RemoteEntryCheck::too_large:
      return "too_large";
    case RemoteEntryCheck::not_sealed:
      return "not_sealed";
    case RemoteEntryCheck::unknown_key_id:
      return "unknown_key_id";
    case RemoteEntryCheck::bad_tag:
      return "bad_tag";
    case RemoteEntryCheck::revoked_key:
      return "revoked_key";
    case RemoteEntryCheck::bad_signature:
      return "bad_signature";
    case RemoteEntryCheck::bad_entry:
      return "bad_entry";
    case RemoteEntryCheck::wrong_type:
      return "wrong_type";
    case RemoteEntryCheck::unavailable:
      return "unavailable";
  }
  return "unknown";
}

}  // namespace cuinline
