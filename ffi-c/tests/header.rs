//! The committed `include/breakerbank.h` must equal what cbindgen generates
//! from the source. Regenerate with `make header` (which runs this test with
//! `BB_UPDATE_HEADER=1`).

use std::path::PathBuf;

#[test]
fn committed_header_is_up_to_date() {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("ffi-c/cbindgen.toml parses");
    let generated = cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header");
    let mut fresh = Vec::new();
    generated.write(&mut fresh);
    let fresh = String::from_utf8(fresh).expect("the header is UTF-8");

    let path = crate_dir.join("../include/breakerbank.h");
    if std::env::var_os("BB_UPDATE_HEADER").is_some() {
        std::fs::write(&path, &fresh).expect("write include/breakerbank.h");
        eprintln!("wrote {}", path.display());
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != fresh {
        let line = committed
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| "the end".to_owned(), |n| format!("line {}", n + 1));
        panic!(
            "include/breakerbank.h is stale (first difference at {line}).\n\
             Regenerate it with `make header` (or `BB_UPDATE_HEADER=1 cargo test -p \
             breakerbank-ffi --test header`) and commit it."
        );
    }
}
