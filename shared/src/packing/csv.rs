//! The openb CSV formats (node list and pod list), with errors that name the line, the column
//! and the problem.

use super::{NodeSpec, PodSpec};

/// A problem in an input file: 1-based line, the column's name, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct CsvError {
    pub line: usize,
    pub column: String,
    pub message: String,
}

fn err(line: usize, column: &str, message: impl Into<String>) -> CsvError {
    CsvError {
        line,
        column: column.to_owned(),
        message: message.into(),
    }
}

/// Rows of a simple CSV (no quoted commas occur in openb files; quotes are stripped).
fn rows(text: &str) -> impl Iterator<Item = (usize, Vec<&str>)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim_end_matches('\r')))
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            (
                n,
                line.split(',')
                    .map(|f| f.trim().trim_matches('"'))
                    .collect(),
            )
        })
}

struct Header<'a> {
    names: Vec<&'a str>,
}

impl<'a> Header<'a> {
    fn read(text: &'a str, required: &[&str]) -> Result<Self, CsvError> {
        let (line, names) = rows(text)
            .next()
            .ok_or_else(|| err(1, "-", "the file is empty"))?;
        for name in required {
            if !names.contains(name) {
                return Err(err(
                    line,
                    name,
                    format!("missing column {name:?} (header: {})", names.join(",")),
                ));
            }
        }
        Ok(Self { names })
    }

    fn get<'r>(&self, row: &'r [&'r str], name: &str) -> &'r str {
        self.names
            .iter()
            .position(|n| *n == name)
            .and_then(|i| row.get(i))
            .copied()
            .unwrap_or("")
    }
}

/// The header (with the required columns) and the data rows, each as long as the header.
type Records<'a> = (Header<'a>, Vec<(usize, Vec<&'a str>)>);

fn records<'a>(text: &'a str, required: &[&str]) -> Result<Records<'a>, CsvError> {
    let header = Header::read(text, required)?;
    let mut records = Vec::new();
    for (line, row) in rows(text).skip(1) {
        if row.len() != header.names.len() {
            let message = format!(
                "{} fields, the header has {}",
                row.len(),
                header.names.len()
            );
            return Err(err(line, "-", message));
        }
        records.push((line, row));
    }
    Ok((header, records))
}

/// The `cpu_milli` and `memory_mib` columns both formats share.
fn cpu_and_memory(header: &Header<'_>, row: &[&str], line: usize) -> Result<(i64, i64), CsvError> {
    let cpu = int(line, "cpu_milli", header.get(row, "cpu_milli"), 0, 1 << 40)?;
    let memory = int(
        line,
        "memory_mib",
        header.get(row, "memory_mib"),
        0,
        1 << 40,
    )?;
    Ok((cpu, memory))
}

fn int(line: usize, column: &str, value: &str, min: i64, max: i64) -> Result<i64, CsvError> {
    let n: i64 = value
        .parse()
        .map_err(|_| err(line, column, format!("{value:?} is not a whole number")))?;
    if n < min || n > max {
        return Err(err(line, column, format!("{n} is outside {min}..={max}")));
    }
    Ok(n)
}

/// `sn,cpu_milli,memory_mib,gpu,model`. Nodes without GPUs are kept (they take CPU-only pods).
pub fn parse_nodes(text: &str) -> Result<Vec<NodeSpec>, CsvError> {
    let (header, records) = records(text, &["sn", "cpu_milli", "memory_mib", "gpu", "model"])?;
    let mut nodes = Vec::new();
    for (line, row) in records {
        let name = header.get(&row, "sn");
        if name.is_empty() {
            return Err(err(line, "sn", "the node name is empty"));
        }
        let gpus = int(
            line,
            "gpu",
            header.get(&row, "gpu"),
            0,
            i64::from(super::MAX_GPUS_PER_NODE),
        )?;
        let model = header.get(&row, "model");
        if gpus > 0 && model.is_empty() {
            return Err(err(line, "model", "a node with GPUs needs a model"));
        }
        let (cpu_milli, memory_mib) = cpu_and_memory(&header, &row, line)?;
        nodes.push(NodeSpec {
            name: name.to_owned(),
            cpu_milli,
            memory_mib,
            gpus: gpus as u8,
            model: model.to_owned(),
        });
    }
    if nodes.is_empty() {
        return Err(err(1, "-", "no nodes"));
    }
    Ok(nodes)
}

/// `name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...]`; other columns are ignored.
pub fn parse_pods(text: &str) -> Result<Vec<PodSpec>, CsvError> {
    let (header, records) = records(
        text,
        &["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"],
    )?;
    let mut pods = Vec::new();
    for (line, row) in records {
        let num_gpu = int(
            line,
            "num_gpu",
            header.get(&row, "num_gpu"),
            0,
            i64::from(super::MAX_GPUS_PER_NODE),
        )?;
        let gpu_milli = int(line, "gpu_milli", header.get(&row, "gpu_milli"), 0, 1000)?;
        if num_gpu == 0 && gpu_milli != 0 {
            return Err(err(
                line,
                "gpu_milli",
                "a pod without GPUs must ask for 0 milli-GPU",
            ));
        }
        if num_gpu > 0 && gpu_milli == 0 {
            return Err(err(
                line,
                "gpu_milli",
                "a pod with GPUs must ask for more than 0 milli-GPU",
            ));
        }
        if num_gpu > 1 && gpu_milli < 1000 {
            return Err(err(
                line,
                "gpu_milli",
                "only single-GPU pods may ask for a fraction",
            ));
        }
        let mut spec: Vec<String> = header
            .get(&row, "gpu_spec")
            .split('|')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        spec.sort();
        spec.dedup();
        let (cpu_milli, memory_mib) = cpu_and_memory(&header, &row, line)?;
        pods.push(PodSpec {
            name: header.get(&row, "name").to_owned(),
            cpu_milli,
            memory_mib,
            num_gpu: num_gpu as u8,
            gpu_milli: gpu_milli as u16,
            gpu_spec: spec,
        });
    }
    if pods.is_empty() {
        return Err(err(1, "-", "no pods"));
    }
    Ok(pods)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_formats() {
        let nodes = parse_nodes(
            "sn,cpu_milli,memory_mib,gpu,model\nn1,96000,393216,8,G2\nn2,8000,1024,0,\n",
        )
        .expect("ok");
        assert_eq!(nodes.len(), 2);
        assert_eq!((nodes[0].gpus, nodes[0].model.as_str()), (8, "G2"));
        let pods = parse_pods(
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\np1,6000,12288,1,460,V100M16|V100M32|V100M16,LS\np2,1000,0,0,0,,BE\n",
        )
        .expect("ok");
        assert_eq!(pods[0].gpu_spec, ["V100M16", "V100M32"]);
        assert_eq!((pods[1].num_gpu, pods[1].gpu_milli), (0, 0));
        // The short multigpu format has no gpu_spec column.
        assert_eq!(
            parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,2,1000\n")
                .expect("ok")
                .len(),
            1
        );
    }

    #[test]
    fn errors_name_line_column_and_problem() {
        let cases = [
            (
                "sn,cpu_milli,memory_mib,gpu\n",
                1,
                "model",
                "missing column",
            ),
            (
                "sn,cpu_milli,memory_mib,gpu,model\nn1,lots,1,1,T4\n",
                2,
                "cpu_milli",
                "\"lots\" is not a whole number",
            ),
            (
                "sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,9,T4\n",
                2,
                "gpu",
                "9 is outside 0..=8",
            ),
            (
                "sn,cpu_milli,memory_mib,gpu,model\n\nn1,1,1,2,\n",
                3,
                "model",
                "needs a model",
            ),
            (
                "sn,cpu_milli,memory_mib,gpu,model\nn1,1,1\n",
                2,
                "-",
                "3 fields",
            ),
        ];
        for (text, line, column, message) in cases {
            let e = parse_nodes(text).expect_err(text);
            assert_eq!((e.line, e.column.as_str()), (line, column), "{e}");
            assert!(e.message.contains(message), "{e}");
        }
        let e = parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,2,500\n")
            .expect_err("fraction");
        assert_eq!((e.line, e.column.as_str()), (2, "gpu_milli"));
        let e = parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,1001\n")
            .expect_err("range");
        assert_eq!(
            e.to_string(),
            "line 2, column gpu_milli: 1001 is outside 0..=1000"
        );
        assert!(parse_pods("").is_err());
    }
}
