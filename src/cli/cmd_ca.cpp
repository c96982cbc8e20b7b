// `meshrl ca init DIR [--hostname H ...] [--ca-key FILE]`,
// `meshrl ca issue NAME [--ca DIR] [--ca-key FILE] [--out DIR]`, `meshrl ca revoke NAME [--ca DIR]`:
// the run's certificate authority (src/trust/run_ca.h). The CA's key goes to FILE (default
// DIR-key/ca.key), outside DIR; only `issue` needs it. Copy CA_DIR/nodes/NAME to the node's
// machine and pass it as `meshrl node --identity DIR`; the coordinator takes `--ca CA_DIR`.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "mesh/protocol.h"
#include "trust/run_ca.h"

namespace meshrl::cli {

namespace {

struct CaArgs {
  std::string dir = "ca";
  std::string name;
  std::string out;
  std::string key_file;  // the CA's private key; "" = trust::default_ca_key_file(dir)
  std::vector<std::string> hostnames;
  int days = 825;
};

void check_name(const std::string& name) {
  if (std::string bad = mesh::check_node_name(name); !bad.empty()) throw StatusError(invalid_argument("[ca] " + bad));
}

}  // namespace

void add_ca_command(CLI::App& app) {
  auto a = std::make_shared<CaArgs>();
  auto* cmd = app.add_subcommand("ca", "the run's certificate authority: init, issue, revoke");
  cmd->require_subcommand(1);

  auto* init = cmd->add_subcommand("init", "create a CA, its allow/revocation lists and the coordinator's certificate in DIR");
  init->add_option("dir", a->dir, "CA folder")->required();
  init->add_option("--hostname", a->hostnames, "a name or IP nodes reach the coordinator at (repeatable; 127.0.0.1 and localhost always)");
  init->add_option("--days", a->days, "validity of the certificates in days");
  init->add_option("--ca-key", a->key_file, "where to write the CA's private key, outside DIR (default DIR-key/ca.key)");
  init->callback([a] {
    if (Status st = trust::init_run_ca(a->dir, a->hostnames, a->days, a->key_file); !st.is_ok()) throw StatusError(st);
    const std::string key = a->key_file.empty() ? trust::default_ca_key_file(a->dir).string() : a->key_file;
    std::printf("run CA in %s: ca.pem, allowed.txt, revoked.txt, coordinator/ (its certificate)\n"
                "CA key in %s: only `meshrl ca issue` needs it, the coordinator never does; keep it offline\n",
                a->dir.c_str(), key.c_str());
  });

  auto* issue = cmd->add_subcommand("issue", "issue node NAME's certificate and put NAME on the allow-list");
  issue->add_option("name", a->name, "node name ([a-z0-9_-])")->required();
  issue->add_option("--ca", a->dir, "CA folder (default ./ca)");
  issue->add_option("--ca-key", a->key_file, "the CA's private key (default CA-key/ca.key)");
  issue->add_option("--out", a->out, "folder to write ca.pem, cert.pem, key.pem (default CA/nodes/NAME)");
  issue->add_option("--days", a->days, "validity in days");
  issue->callback([a] {
    check_name(a->name);
    auto out = trust::issue_node_identity(a->dir, a->name, a->out, a->days, a->key_file);
    if (!out.is_ok()) throw StatusError(out.status());
    std::printf("issued %s: %s (copy it to the node, run `meshrl node --name %s --identity DIR`)\n", a->name.c_str(),
                out.value().c_str(), a->name.c_str());
  });

  auto* revoke = cmd->add_subcommand("revoke", "refuse node NAME from now on (a running coordinator rereads the list)");
  revoke->add_option("name", a->name, "node name")->required();
  revoke->add_option("--ca", a->dir, "CA folder (default ./ca)");
  revoke->callback([a] {
    check_name(a->name);
    if (Status st = trust::revoke_node(a->dir, a->name); !st.is_ok()) throw StatusError(st);
    std::printf("revoked %s\n", a->name.c_str());
  });
}

}  // namespace meshrl::cli
