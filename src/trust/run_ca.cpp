// The run CA with OpenSSL's C API. See run_ca.h.
#include "trust/run_ca.h"

#include <arpa/inet.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

#include "core/file_io.h"
#include "trust/name_list.h"
#include "trust/private_file.h"

namespace meshrl::trust {

namespace fs = std::filesystem;

namespace {

struct SslFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(BIGNUM* p) const { BN_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
};
using PKey = std::unique_ptr<EVP_PKEY, SslFree>;
using Cert = std::unique_ptr<X509, SslFree>;
using Bio = std::unique_ptr<BIO, SslFree>;

Status ssl_error(const std::string& what) {
  char buf[256] = "unknown error";
  if (unsigned long e = ERR_get_error()) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return invalid_argument("[ca] " + what + ": " + buf);
}

Result<PKey> new_p256_key() {
  PKey k(EVP_EC_gen("P-256"));
  if (!k) return ssl_error("generating an EC P-256 key");
  return k;
}

enum class Role { kCa, kServer, kClient };

Status add_ext(X509* x, X509V3_CTX* ctx, int nid, const std::string& value) {
  std::unique_ptr<X509_EXTENSION, SslFree> e(X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str()));
  if (!e || !X509_add_ext(x, e.get(), -1)) return ssl_error(std::string("extension ") + OBJ_nid2sn(nid) + " = " + value);
  return Status::ok();
}

// A certificate for `key` named `cn`, signed by issuer (nullptr: self-signed with `key`).
Result<Cert> make_cert(EVP_PKEY* key, const std::string& cn, X509* issuer, EVP_PKEY* issuer_key, Role role,
                       const std::string& san, int valid_days) {
  Cert x(X509_new());
  if (!x) return ssl_error("X509_new");
  X509_set_version(x.get(), 2);  // v3
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return ssl_error("random serial");
  serial[0] &= 0x7f;  // positive
  std::unique_ptr<BIGNUM, SslFree> bn(BN_bin2bn(serial, sizeof serial, nullptr));
  if (!bn || !BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(x.get()))) return ssl_error("serial");
  // An hour back: a node whose clock runs a little behind still accepts a fresh certificate.
  X509_gmtime_adj(X509_getm_notBefore(x.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), static_cast<long>(valid_days) * 86400L);
  if (!X509_set_pubkey(x.get(), key)) return ssl_error("set public key");
  X509_NAME* name = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("meshrl run"), -1, -1, 0);
  if (!X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0))
    return ssl_error("common name '" + cn + "'");
  X509_set_issuer_name(x.get(), issuer ? X509_get_subject_name(issuer) : name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer ? issuer : x.get(), x.get(), nullptr, nullptr, 0);
  MESHRL_RETURN_IF_ERROR(add_ext(x.get(), &ctx, NID_basic_constraints, role == Role::kCa ? "critical,CA:TRUE,pathlen:0" : "critical,CA:FALSE"));
  MESHRL_RETURN_IF_ERROR(add_ext(x.get(), &ctx, NID_key_usage,
                                 role == Role::kCa ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature,keyAgreement"));
  if (role != Role::kCa)
    MESHRL_RETURN_IF_ERROR(add_ext(x.get(), &ctx, NID_ext_key_usage, role == Role::kServer ? "serverAuth" : "clientAuth"));
  MESHRL_RETURN_IF_ERROR(add_ext(x.get(), &ctx, NID_subject_key_identifier, "hash"));
  if (issuer) MESHRL_RETURN_IF_ERROR(add_ext(x.get(), &ctx, NID_authority_key_identifier, "keyid:always"));
  if (!san.empty()) MESHRL_RETURN_IF_ERROR(add_ext(x.get(), &ctx, NID_subject_alt_name, san));
  if (!X509_sign(x.get(), issuer_key ? issuer_key : key, EVP_sha256())) return ssl_error("signing the certificate of '" + cn + "'");
  return x;
}

std::string bio_string(BIO* b) {
  char* p = nullptr;
  const long n = BIO_get_mem_data(b, &p);
  return std::string(p, static_cast<size_t>(n));
}

Result<std::string> cert_pem(X509* x) {
  Bio b(BIO_new(BIO_s_mem()));
  if (!b || !PEM_write_bio_X509(b.get(), x)) return ssl_error("writing a certificate");
  return bio_string(b.get());
}

Result<std::string> key_pem(EVP_PKEY* k) {
  Bio b(BIO_new(BIO_s_mem()));
  if (!b || !PEM_write_bio_PrivateKey(b.get(), k, nullptr, nullptr, 0, nullptr, nullptr)) return ssl_error("writing a private key");
  return bio_string(b.get());
}

Result<Cert> read_cert(const fs::path& f) {
  MESHRL_ASSIGN_OR_RETURN(std::string pem, read_file(f, 1 << 20));
  Bio b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Cert x(PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr));
  if (!x) return ssl_error(f.string() + " is not a PEM certificate");
  return x;
}

Result<PKey> read_key(const fs::path& f) {
  MESHRL_ASSIGN_OR_RETURN(std::string pem, read_file(f, 1 << 20));
  Bio b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PKey k(PEM_read_bio_PrivateKey(b.get(), nullptr, nullptr, nullptr));
  if (!k) return ssl_error(f.string() + " is not a PEM private key");
  return k;
}

bool is_ip_literal(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

// Writes an identity folder: the CA certificate, the leaf certificate and its key (0600).
Status write_identity(const IdentityFiles& f, const std::string& ca_pem, X509* cert, EVP_PKEY* key) {
  std::error_code ec;
  fs::create_directories(f.cert.parent_path(), ec);
  if (ec) return io_error("[ca] cannot create " + f.cert.parent_path().string() + ": " + ec.message());
  MESHRL_ASSIGN_OR_RETURN(std::string c, cert_pem(cert));
  MESHRL_ASSIGN_OR_RETURN(std::string k, key_pem(key));
  MESHRL_RETURN_IF_ERROR(write_private_file(f.key, k));
  MESHRL_RETURN_IF_ERROR(write_file_atomic(f.cert, c));
  return write_file_atomic(f.ca_cert, ca_pem);
}

struct LoadedCa {
  Cert cert;
  PKey key;
  std::string pem;
};

// Whether `inner` is `outer` or lies under it, after resolving symbolic links and "..".
bool is_within(const fs::path& inner, const fs::path& outer) {
  std::error_code ec;
  const fs::path a = fs::weakly_canonical(fs::absolute(inner), ec);
  const fs::path b = fs::weakly_canonical(fs::absolute(outer), ec);
  auto ai = a.begin();
  for (auto bi = b.begin(); bi != b.end(); ++bi, ++ai) {
    if (bi->empty()) continue;  // the trailing "" of "dir/"
    if (ai == a.end() || *ai != *bi) return false;
  }
  return true;
}

std::string move_key_hint(const CaFiles& ca, const fs::path& key_file) {
  return ca.key_in_dir().string() + " is the CA's private key in the folder the coordinator reads; move it out (`mkdir -m 700 " +
         key_file.parent_path().string() + " && mv " + ca.key_in_dir().string() + " " + key_file.string() +
         "`) and keep it offline; `meshrl ca issue` takes --ca-key FILE when it is elsewhere";
}

Result<LoadedCa> load_ca(const CaFiles& ca, const fs::path& key_file) {
  LoadedCa out;
  if (!fs::exists(ca.ca_cert()))
    return not_found("[ca] no CA in " + ca.dir.string() + " (" + ca.ca_cert().string() + " missing); run `meshrl ca init " +
                     ca.dir.string() + "` first");
  if (!fs::exists(key_file) || is_within(key_file, ca.dir)) {
    if (fs::exists(ca.key_in_dir())) return invalid_argument("[ca] " + move_key_hint(ca, default_ca_key_file(ca.dir)));
    if (fs::exists(key_file))
      return invalid_argument("[ca] " + key_file.string() + " lies inside " + ca.dir.string() +
                              ", the folder the coordinator reads; move the CA's key out of it and keep it offline");
    return not_found("[ca] no CA key at " + key_file.string() + "; pass --ca-key FILE (where `meshrl ca init` wrote it)");
  }
  MESHRL_ASSIGN_OR_RETURN(out.pem, read_file(ca.ca_cert(), 1 << 20));
  MESHRL_ASSIGN_OR_RETURN(out.cert, read_cert(ca.ca_cert()));
  MESHRL_ASSIGN_OR_RETURN(out.key, read_key(key_file));
  if (X509_check_private_key(out.cert.get(), out.key.get()) != 1)
    return ssl_error(key_file.string() + " is not the key of " + ca.ca_cert().string());
  return out;
}

}  // namespace

fs::path default_ca_key_file(const fs::path& ca_dir) {
  fs::path d = ca_dir.lexically_normal();
  if (!d.has_filename()) d = d.parent_path();  // "ca/" -> "ca"
  if (d.empty() || d.filename() == "." || d.filename() == "..") {
    d = fs::absolute(d).lexically_normal();
    if (!d.has_filename()) d = d.parent_path();
  }
  return d.parent_path() / (d.filename().string() + "-key") / "ca.key";
}

Status init_run_ca(const fs::path& dir, const std::vector<std::string>& hostnames, int valid_days, const fs::path& key_file_arg) {
  const CaFiles ca{dir};
  const fs::path key_file = key_file_arg.empty() ? default_ca_key_file(dir) : key_file_arg;
  if (fs::exists(ca.ca_cert()) || fs::exists(ca.key_in_dir()))
    return invalid_argument("[ca] " + dir.string() + " already holds a CA; refusing to overwrite it (its certificates would stop working)");
  if (fs::exists(key_file))
    return invalid_argument("[ca] " + key_file.string() + " already exists; refusing to overwrite a CA key (pick another --ca-key)");
  if (is_within(key_file, dir))
    return invalid_argument("[ca] --ca-key " + key_file.string() + " lies inside " + dir.string() +
                            ", the folder the coordinator reads; put the CA's key elsewhere (default " +
                            default_ca_key_file(dir).string() + ")");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return io_error("[ca] cannot create " + dir.string() + ": " + ec.message());
  const fs::path key_dir = key_file.parent_path().empty() ? fs::path(".") : key_file.parent_path();
  if (!fs::exists(key_dir)) {
    fs::create_directories(key_dir, ec);
    // Only a folder made here is narrowed to its owner; an existing one is the operator's to set.
    if (!ec) fs::permissions(key_dir, fs::perms::owner_all, fs::perm_options::replace, ec);
    if (ec) return io_error("[ca] cannot create " + key_dir.string() + " (owner-only): " + ec.message());
  }
  MESHRL_ASSIGN_OR_RETURN(PKey ca_key, new_p256_key());
  MESHRL_ASSIGN_OR_RETURN(Cert ca_cert, make_cert(ca_key.get(), "meshrl run CA", nullptr, nullptr, Role::kCa, "", valid_days));
  MESHRL_ASSIGN_OR_RETURN(std::string ca_pem, cert_pem(ca_cert.get()));
  MESHRL_ASSIGN_OR_RETURN(std::string ca_key_pem, key_pem(ca_key.get()));
  MESHRL_RETURN_IF_ERROR(write_private_file(key_file, ca_key_pem));
  MESHRL_RETURN_IF_ERROR(write_file_atomic(ca.ca_cert(), ca_pem));
  for (const fs::path& list : {ca.allowed(), ca.revoked()})
    if (!fs::exists(list)) MESHRL_RETURN_IF_ERROR(write_file_atomic(list, std::string("# one node name per line\n")));

  std::string san = "IP:127.0.0.1,IP:::1,DNS:localhost";
  for (const std::string& h : hostnames) {
    if (h.empty() || h.find_first_of(", \t\n") != std::string::npos)
      return invalid_argument("[ca] --hostname '" + h + "' is not a host name or IP address");
    san += (is_ip_literal(h) ? ",IP:" : ",DNS:") + h;
  }
  MESHRL_ASSIGN_OR_RETURN(PKey key, new_p256_key());
  MESHRL_ASSIGN_OR_RETURN(Cert cert, make_cert(key.get(), kCoordinatorName, ca_cert.get(), ca_key.get(), Role::kServer, san, valid_days));
  return write_identity(ca.coordinator(), ca_pem, cert.get(), key.get());
}

Result<fs::path> issue_node_identity(const fs::path& ca_dir, const std::string& name, const fs::path& out_dir, int valid_days,
                                     const fs::path& key_file) {
  if (name == kCoordinatorName) return invalid_argument("[ca] 'coordinator' is the coordinator's certificate name; pick another node name");
  const CaFiles ca{ca_dir};
  MESHRL_ASSIGN_OR_RETURN(LoadedCa loaded, load_ca(ca, key_file.empty() ? default_ca_key_file(ca_dir) : key_file));
  MESHRL_ASSIGN_OR_RETURN(PKey key, new_p256_key());
  MESHRL_ASSIGN_OR_RETURN(Cert cert, make_cert(key.get(), name, loaded.cert.get(), loaded.key.get(), Role::kClient, "DNS:" + name, valid_days));
  const fs::path out = out_dir.empty() ? ca.node_dir(name) : out_dir;
  MESHRL_RETURN_IF_ERROR(write_identity(IdentityFiles::in(out), loaded.pem, cert.get(), key.get()));
  MESHRL_RETURN_IF_ERROR(add_to_name_list(ca.allowed(), name));
  return out;
}

Status revoke_node(const fs::path& ca_dir, const std::string& name) {
  const CaFiles ca{ca_dir};
  if (!fs::exists(ca.ca_cert())) return not_found("[ca] no CA in " + ca_dir.string() + " (" + ca.ca_cert().string() + " missing)");
  return add_to_name_list(ca.revoked(), name);
}

}  // namespace meshrl::trust
