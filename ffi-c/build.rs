//! Gives the shared library the soname it is installed under
//! (`make install`, mk/install.mk): `libbreakerbank.so.<major>`, so a
//! program linked against it keeps loading the ABI it was built for.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "freebsd" || os == "android" {
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libbreakerbank.so.{major}");
    }
}
