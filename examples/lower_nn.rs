//! Writes the ONNX graph a `.nn` model is lowered to for tract (its inputs and memory inputs
//! rank 4, its outputs then its memory outputs, under their `.nn` names), so that onnxruntime
//! can run the same computation (tests/peer/peer_nn_recurrent.py).
//! `cargo run --example lower_nn -- IN.nn OUT.onnx`

use mlagents::barracuda::{read_file, to_onnx, LowerOptions};
use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output] = args.as_slice() else {
        return Err("usage: lower_nn IN.nn OUT.onnx".into());
    };
    let model = read_file(std::path::Path::new(input))?;
    let graph = to_onnx(&model, LowerOptions { deterministic: true, ..Default::default() })?;
    std::fs::write(output, graph.encode_to_vec())?;
    Ok(())
}
