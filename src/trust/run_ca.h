// The run's certificate authority: `meshrl ca init|issue|revoke`. One folder holds the CA's
// certificate and the lists the coordinator checks on every call; each identity it issues is a
// folder of three PEM files that one machine needs (copy it there, pass it with --identity / --ca).
// The CA's private key lives apart (KEY_FILE, default CA_DIR-key/ca.key), never in CA_DIR: the
// coordinator reads CA_DIR, and whoever takes its host must not be able to admit nodes. Only
// `meshrl ca issue` needs the key; keep it offline between issues.
//
//   KEY_FILE (0600, its folder 0700)     the CA's key: EC P-256
//   CA_DIR/ca.pem                        the CA: self-signed, may sign leaves only
//   CA_DIR/allowed.txt                   node names admitted to the run, one a line (`issue` adds)
//   CA_DIR/revoked.txt                   node names refused even with a valid certificate (`revoke`)
//   CA_DIR/coordinator/{ca,cert,key}.pem the coordinator's server certificate (CN "coordinator";
//                                        SAN 127.0.0.1, localhost and the --hostname values)
//   OUT/{ca,cert,key}.pem                a node's client certificate (CN = SAN DNS = the node name)
//
// Revocation is by name, not by serial: a revoked name stays refused whatever certificate it
// shows, so reissuing a certificate cannot undo it by accident (remove the line to readmit).
// Uses OpenSSL's C API; knows nothing about gRPC or the mesh.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/status.h"

namespace meshrl::trust {

inline constexpr const char* kCoordinatorName = "coordinator";

// The three files of one identity.
struct IdentityFiles {
  std::filesystem::path ca_cert, cert, key;
  static IdentityFiles in(const std::filesystem::path& dir) { return {dir / "ca.pem", dir / "cert.pem", dir / "key.pem"}; }
};

struct CaFiles {
  std::filesystem::path dir;
  std::filesystem::path ca_cert() const { return dir / "ca.pem"; }
  // Where meshrl once wrote the CA's key: refused by init and issue, with a hint to move it.
  std::filesystem::path key_in_dir() const { return dir / "ca.key"; }
  std::filesystem::path allowed() const { return dir / "allowed.txt"; }
  std::filesystem::path revoked() const { return dir / "revoked.txt"; }
  IdentityFiles coordinator() const { return IdentityFiles::in(dir / "coordinator"); }
  std::filesystem::path node_dir(const std::string& name) const { return dir / "nodes" / name; }
};

// The CA key's default place: the sibling folder DIR-key ("runs/ca" -> "runs/ca-key/ca.key").
std::filesystem::path default_ca_key_file(const std::filesystem::path& ca_dir);

// Creates the CA (its key in key_file, empty = default_ca_key_file(dir)), the empty lists and the
// coordinator's certificate. Refuses a folder that already holds a CA or an existing key file
// (overwriting either would orphan every issued certificate), and a key_file inside dir.
// `hostnames`: extra names or IP addresses the coordinator is reached at (its SAN; 127.0.0.1 and
// localhost always).
Status init_run_ca(const std::filesystem::path& dir, const std::vector<std::string>& hostnames, int valid_days = 825,
                   const std::filesystem::path& key_file = {});

// Issues a client certificate for node `name` (the caller checks the name's syntax; "coordinator"
// is refused), signed with the key in key_file (empty = default_ca_key_file(ca_dir)), into out_dir
// (empty = CA_DIR/nodes/NAME), adds the name to allowed.txt and takes it off nothing else: a
// revoked name stays revoked. Returns the folder written.
Result<std::filesystem::path> issue_node_identity(const std::filesystem::path& ca_dir, const std::string& name,
                                                  const std::filesystem::path& out_dir, int valid_days = 825,
                                                  const std::filesystem::path& key_file = {});

// Adds `name` to revoked.txt (idempotent; no key needed). The coordinator rereads the list when it
// changes.
Status revoke_node(const std::filesystem::path& ca_dir, const std::string& name);

}  // namespace meshrl::trust
