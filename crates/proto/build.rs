//! Compiles `proto/toolplane/v1/*.proto` with protox (pure Rust: no system `protoc`), writes
//! the descriptor set for gRPC reflection, and generates tonic clients and servers.

use std::path::PathBuf;

use prost::Message;

const FILES: &[&str] = &[
    "toolplane/v1/tool.proto",
    "toolplane/v1/catalog.proto",
    "toolplane/v1/policy.proto",
    "toolplane/v1/tenants.proto",
    "toolplane/v1/executors.proto",
    "toolplane/v1/registry.proto",
    "toolplane/v1/executor.proto",
    "toolplane/v1/audit.proto",
    "toolplane/v1/admins.proto",
];

/// The messages whose `Debug` is written by hand, without their secret (src/redact.rs).
fn crate_redacted() -> [&'static str; 4] {
    [
        ".toolplane.v1.Credential",
        ".toolplane.v1.ProviderCredential",
        ".toolplane.v1.ConnectProviderRequest",
        ".toolplane.v1.AuthenticateRequest",
    ]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    for file in FILES {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
    let descriptors = protox::compile(FILES, [&root])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("toolplane_descriptor.bin"),
        descriptors.encode_to_vec(),
    )?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .emit_rerun_if_changed(false)
        // Decode errors are INVALID_ARGUMENT (crate::codec), not prost's INTERNAL.
        .codec_path("crate::codec::Codec")
        // Messages that hold a secret print without it (crate::redact).
        .skip_debug(crate_redacted())
        .compile_fds(descriptors)?;
    Ok(())
}
