//! Compiles the ML-Agents communicator `.proto` files with the pure-Rust `protox`
//! (no `protoc` on any machine) and generates prost messages plus the tonic client/server.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = "proto/communicator_objects";
    let mut protos: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "proto"))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    protos.sort();
    println!("cargo:rerun-if-changed={dir}");
    // With the `train` feature, binaries find libtorch without LD_LIBRARY_PATH: torch-sys
    // (links = "tch") exports the library folder it linked against.
    if let Ok(lib) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
    }
    let files = protox::compile(&protos, ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(files)?;
    Ok(())
}
