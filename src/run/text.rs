//! Reports as people read them: `key: value` lines, nested objects and lists indented, lists
//! of short items on one line (`--json` prints the same report for machines).

/// A serialisable report as text for people.
pub fn for_people<T: serde::Serialize>(report: &T) -> String {
    let value = serde_json::to_value(report).expect("reports serialise to JSON");
    let mut text = String::new();
    for (key, value) in value.as_object().into_iter().flatten() {
        write_value(&mut text, key, value, "");
    }
    text
}

/// A scalar as a person reads it: strings unquoted, whole floats without a fraction.
fn scalar_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => format!("{f:.0}"),
            _ => n.to_string(),
        },
        serde_json::Value::Null => "none".into(),
        other => other.to_string(),
    }
}

/// `key: value` lines, nested objects and lists indented (`--json` prints the same for
/// machines).
fn write_value(out: &mut String, key: &str, value: &serde_json::Value, indent: &str) {
    use serde_json::Value;
    use std::fmt::Write;
    let deeper = format!("{indent}  ");
    match value {
        Value::Object(fields) if fields.is_empty() => {
            let _ = writeln!(out, "{indent}{key}: none");
        }
        Value::Object(fields) => {
            let _ = writeln!(out, "{indent}{key}:");
            for (k, v) in fields {
                write_value(out, k, v, &deeper);
            }
        }
        Value::Array(items) if items.iter().all(|i| i.is_string()) && items.iter().any(|i| scalar_text(i).len() > 30) => {
            // Sentences (e.g. violations): one per line.
            let _ = writeln!(out, "{indent}{key}:");
            for item in items {
                let _ = writeln!(out, "{deeper}- {}", scalar_text(item));
            }
        }
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            let list: Vec<String> = items.iter().map(scalar_text).collect();
            let _ = writeln!(out, "{indent}{key}: {}", if list.is_empty() { "none".into() } else { list.join(", ") });
        }
        Value::Array(items) => {
            let _ = writeln!(out, "{indent}{key}:");
            for item in items {
                match item.as_object() {
                    // One line per item when its fields are scalars: `- name: obs_0, shape: batch, 8`.
                    Some(fields) if fields.values().all(|v| !v.is_object() && !v.as_array().is_some_and(|a| a.iter().any(|i| i.is_object() || i.is_string()))) => {
                        let parts: Vec<String> = fields
                            .iter()
                            .map(|(k, v)| match v.as_array() {
                                Some(list) if list.is_empty() => format!("{k}: none"),
                                Some(list) => format!("{k}: [{}]", list.iter().map(scalar_text).collect::<Vec<_>>().join(", ")),
                                None => format!("{k}: {}", scalar_text(v)),
                            })
                            .collect();
                        let _ = writeln!(out, "{deeper}- {}", parts.join(", "));
                    }
                    Some(fields) => {
                        // The first field on the item's line, the others under it.
                        let mut first = true;
                        for (k, v) in fields {
                            let mut line = String::new();
                            write_value(&mut line, k, v, &format!("{deeper}  "));
                            if first {
                                line.replace_range(..deeper.len() + 2, &format!("{deeper}- "));
                                first = false;
                            }
                            out.push_str(&line);
                        }
                    }
                    None => write_value(out, "-", item, &deeper),
                }
            }
        }
        scalar => {
            let _ = writeln!(out, "{indent}{key}: {}", scalar_text(scalar));
        }
    }
}
