// The run CA's files and lists, and the Ed25519 / BLAKE2b primitives (src/trust).
//   build/tests/test_trust
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "core/file_io.h"
#include "trust/name_list.h"
#include "trust/run_ca.h"
#include "trust/signing_key.h"

namespace meshrl::trust {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& tag) {
  const fs::path d = fs::temp_directory_path() / ("meshrl-trust-" + std::to_string(::getpid()) + "-" + tag);
  fs::remove_all(d);
  return d;
}

bool owner_only(const fs::path& f) {
  const auto p = fs::status(f).permissions();
  return (p & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none;
}

TEST(RunCa, InitIssueRevokeWriteTheFilesAndLists) {
  const fs::path d = fresh_dir("ca");
  const fs::path key = default_ca_key_file(d);
  fs::remove_all(key.parent_path());
  ASSERT_TRUE(init_run_ca(d, {"coord.example.org", "10.1.2.3"}).is_ok());
  const CaFiles ca{d};
  for (const fs::path& f : {ca.ca_cert(), key, ca.allowed(), ca.revoked(), ca.coordinator().cert, ca.coordinator().key})
    EXPECT_TRUE(fs::exists(f)) << f;
  EXPECT_TRUE(owner_only(key));
  EXPECT_TRUE(owner_only(key.parent_path()));
  EXPECT_TRUE(owner_only(ca.coordinator().key));
  EXPECT_NE(read_file(ca.ca_cert()).value().find("BEGIN CERTIFICATE"), std::string::npos);
  // A second init would orphan every certificate: refused.
  EXPECT_FALSE(init_run_ca(d, {}).is_ok());
  EXPECT_FALSE(init_run_ca(fresh_dir("badhost"), {"two words"}).is_ok());

  auto out = issue_node_identity(d, "paris", {});
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(out.value(), ca.node_dir("paris"));
  const IdentityFiles id = IdentityFiles::in(out.value());
  EXPECT_TRUE(owner_only(id.key));
  EXPECT_EQ(read_file(id.ca_cert).value(), read_file(ca.ca_cert()).value());
  EXPECT_FALSE(issue_node_identity(d, "coordinator", {}).is_ok());
  EXPECT_FALSE(issue_node_identity(fresh_dir("none"), "paris", {}).is_ok());  // no CA there

  AccessPolicy policy(ca.allowed(), ca.revoked());
  EXPECT_EQ(policy.refusal("paris"), "");
  EXPECT_NE(policy.refusal("zurich").find("allow-list"), std::string::npos);
  ASSERT_TRUE(issue_node_identity(d, "paris", fresh_dir("paris-again")).is_ok());  // reissue: listed once
  ASSERT_TRUE(revoke_node(d, "paris").is_ok());
  ASSERT_TRUE(revoke_node(d, "paris").is_ok());
  EXPECT_NE(policy.refusal("paris").find("revoked"), std::string::npos);  // reread without a restart
  const std::string allowed = read_file(ca.allowed()).value();
  EXPECT_EQ(allowed.find("paris"), allowed.rfind("paris"));
  fs::remove_all(d);
  fs::remove_all(key.parent_path());
}

bool holds_a_private_key(const fs::path& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && read_file(e.path()).value().find("PRIVATE KEY") != std::string::npos &&
        e.path().parent_path() != dir / "coordinator")
      return true;
  return false;
}

// The coordinator reads CA_DIR: whoever takes its host must not get the key that admits nodes.
TEST(RunCa, TheSigningKeyStaysOutOfTheCoordinatorsFolder) {
  const fs::path root = fresh_dir("keyout");
  const fs::path d = root / "ca";
  const fs::path key = root / "offline" / "run.key";
  ASSERT_TRUE(init_run_ca(d, {}, 825, key).is_ok());
  EXPECT_TRUE(fs::exists(key));
  EXPECT_TRUE(owner_only(key));
  EXPECT_FALSE(fs::exists(CaFiles{d}.key_in_dir()));
  EXPECT_FALSE(holds_a_private_key(d));  // only the coordinator's own key.pem, under coordinator/
  EXPECT_FALSE(fs::exists(default_ca_key_file(d)));

  // issue needs the key's path; without it (nothing at the default place) it says where to look.
  auto missing = issue_node_identity(d, "paris", {});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("--ca-key"), std::string::npos) << missing.status().message();
  auto out = issue_node_identity(d, "paris", {}, 825, key);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(read_file(IdentityFiles::in(out.value()).ca_cert).value(), read_file(CaFiles{d}.ca_cert()).value());

  // A key inside the folder, asked for or found there (as meshrl once wrote it), is refused.
  EXPECT_FALSE(init_run_ca(root / "ca2", {}, 825, root / "ca2" / "ca.key").is_ok());
  EXPECT_FALSE(fs::exists(root / "ca2" / "ca.key"));
  EXPECT_FALSE(init_run_ca(root / "ca3", {}, 825, key).is_ok());  // that key file already exists
  fs::rename(key, CaFiles{d}.key_in_dir());
  auto inside = issue_node_identity(d, "zurich", {}, 825, CaFiles{d}.key_in_dir());
  ASSERT_FALSE(inside.is_ok());
  EXPECT_NE(inside.status().message().find("move it out"), std::string::npos) << inside.status().message();
  EXPECT_FALSE(issue_node_identity(d, "zurich", {}).is_ok());
  fs::remove_all(root);
}

TEST(RunCa, DefaultKeyFileIsASiblingFolder) {
  EXPECT_EQ(default_ca_key_file("runs/ca"), fs::path("runs/ca-key/ca.key"));
  EXPECT_EQ(default_ca_key_file("runs/ca/"), fs::path("runs/ca-key/ca.key"));
  EXPECT_EQ(default_ca_key_file("ca"), fs::path("ca-key/ca.key"));
  const fs::path here = fs::current_path();
  EXPECT_EQ(default_ca_key_file("."), here.parent_path() / (here.filename().string() + "-key") / "ca.key");
}

TEST(NameList, CommentsBlanksAndAMissingFile) {
  const fs::path d = fresh_dir("list");
  fs::create_directories(d);
  NameListFile list(d / "names.txt");
  EXPECT_FALSE(list.contains("paris"));
  ASSERT_TRUE(write_file_atomic(d / "names.txt", std::string("# header\n  paris  \n\nzurich # comment\n")).is_ok());
  EXPECT_TRUE(list.contains("paris"));
  EXPECT_TRUE(list.contains("zurich"));
  EXPECT_FALSE(list.contains("# header"));
  fs::remove(d / "names.txt");
  EXPECT_FALSE(list.contains("paris"));
  fs::remove_all(d);
}

TEST(SigningKey, SignsVerifiesAndRejectsTampering) {
  const SigningKey k = SigningKey::generate();
  const SigningKey other = SigningKey::generate();
  EXPECT_EQ(k.public_key().size(), kPublicKeyBytes);
  const std::string sig = k.sign("round 7");
  EXPECT_EQ(sig.size(), kSignatureBytes);
  EXPECT_TRUE(verify_signature(k.public_key(), "round 7", sig));
  EXPECT_FALSE(verify_signature(k.public_key(), "round 8", sig));
  EXPECT_FALSE(verify_signature(other.public_key(), "round 7", sig));
  std::string flipped = sig;
  flipped[5] ^= 1;
  EXPECT_FALSE(verify_signature(k.public_key(), "round 7", flipped));
  EXPECT_FALSE(verify_signature(k.public_key(), "round 7", sig.substr(1)));
  EXPECT_FALSE(verify_signature("short", "round 7", sig));
}

TEST(SigningKey, KeyFileIsCreatedOwnerOnlyAndReloadsTheSameKey) {
  const fs::path d = fresh_dir("key");
  fs::create_directories(d);
  auto a = SigningKey::load_or_create(d / "signing.key");
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_TRUE(owner_only(d / "signing.key"));
  auto b = SigningKey::load_or_create(d / "signing.key");
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(a.value().public_key(), b.value().public_key());
  ASSERT_TRUE(write_file_atomic(d / "bad.key", std::string("not a key\n")).is_ok());
  auto bad = SigningKey::load_or_create(d / "bad.key");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("bad.key"), std::string::npos);
  fs::remove_all(d);
}

TEST(Blake2b, KnownVector) {
  // BLAKE2b-256 of the empty string (RFC 7693 parameters, 32-byte digest).
  EXPECT_EQ(to_hex(blake2b_256("")), "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8");
}

}  // namespace
}  // namespace meshrl::trust
