//! A skill bundle as uploaded: the files of one folder with a `SKILL.md` whose
//! front matter gives the skill's `name` and `description`. Checked whole before anything is
//! stored, so a bad upload changes nothing; written out as the zip that `versions.download`
//! serves.

use super::invalid::{Invalid, Valid};

/// Largest bundle: the sum of its files' sizes.
pub const MAX_BUNDLE_BYTES: usize = 8 * 1024 * 1024;
/// Most files one bundle may hold.
pub const MAX_FILES: usize = 500;
/// Longest path of a file inside a bundle, in bytes.
pub const MAX_PATH_BYTES: usize = 512;
/// Longest `name` in `SKILL.md` (a kebab-case slug).
pub const MAX_NAME_CHARS: usize = 64;
/// Longest `description` in `SKILL.md`.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// The file every bundle has at its root.
pub const SKILL_MD: &str = "SKILL.md";

/// One file of a bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleFile {
    /// Relative to the bundle's folder, `/`-separated, normalised (`SKILL.md`, `scripts/x.sh`).
    pub path: String,
    /// Whether it is mounted and zipped with execute bits (uploads carry no modes: a file
    /// starting with `#!` is taken to be a script).
    pub executable: bool,
    pub content: Vec<u8>,
}

/// A checked bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    /// From `SKILL.md` (else the folder's name).
    pub name: String,
    pub description: String,
    /// Sorted by path; `SKILL.md` among them.
    pub files: Vec<BundleFile>,
}

/// Checks uploaded files — `(filename as sent, bytes)`, in upload order — and makes a bundle
/// of them. Filenames keep their folder (`my-skill/SKILL.md`, as the SDK's `files_from_dir`
/// sends them); files sent without one (`SKILL.md`) form a bundle of their own.
pub fn parse(uploads: Vec<(String, Vec<u8>)>) -> Valid<Bundle> {
    if uploads.is_empty() {
        return Err(Invalid::new(
            "`files[]` is required: send each file of the skill's folder as a `files[]` part, SKILL.md among them",
        ));
    }
    if uploads.len() > MAX_FILES {
        return Err(Invalid::new(format!(
            "a skill bundle may hold at most {MAX_FILES} files, not {}",
            uploads.len()
        )));
    }
    let total: usize = uploads.iter().map(|(_, b)| b.len()).sum();
    if total > MAX_BUNDLE_BYTES {
        return Err(too_large());
    }
    let mut split = Vec::with_capacity(uploads.len());
    for (name, bytes) in uploads {
        split.push((clean_path(&name)?, bytes));
    }
    let folder = common_folder(&split)?;
    let mut files: Vec<BundleFile> = split
        .into_iter()
        .map(|(parts, content)| {
            let skip = usize::from(folder.is_some());
            BundleFile {
                path: parts[skip..].join("/"),
                executable: content.starts_with(b"#!"),
                content,
            }
        })
        .collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    if let Some(w) = files.windows(2).find(|w| w[0].path == w[1].path) {
        return Err(Invalid::new(format!(
            "the bundle holds `{}` twice",
            w[0].path
        )));
    }
    let Some(skill_md) = files.iter().find(|f| f.path == SKILL_MD) else {
        let at = folder
            .as_deref()
            .map_or("its root".to_string(), |f| format!("`{f}/`"));
        return Err(Invalid::new(format!(
            "the bundle has no SKILL.md at {at}: a skill is a folder with a SKILL.md (front matter with `name` and `description`)"
        )));
    };
    let text = std::str::from_utf8(&skill_md.content)
        .map_err(|_| Invalid::new("SKILL.md is not UTF-8 text"))?;
    let front = front_matter(text)?;
    let name = match front.name.or(folder) {
        Some(n) => n,
        None => {
            return Err(Invalid::new(
                "SKILL.md's front matter has no `name` (and the files are in no folder to name the skill after)",
            ));
        }
    };
    check_name(&name)?;
    let description = front.description.unwrap_or_default();
    if description.trim().is_empty() {
        return Err(Invalid::new(
            "SKILL.md's front matter needs a `description`: it tells the model when to use the skill",
        ));
    }
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(Invalid::new(format!(
            "SKILL.md's `description` is longer than {MAX_DESCRIPTION_CHARS} characters"
        )));
    }
    Ok(Bundle {
        name,
        description: description.trim().to_string(),
        files,
    })
}

fn too_large() -> Invalid {
    Invalid::with_code(
        "skill_too_large",
        format!("a skill bundle's files may total at most {MAX_BUNDLE_BYTES} bytes"),
    )
}

/// The components of an uploaded filename, refusing what could climb out of the folder.
fn clean_path(name: &str) -> Valid<Vec<String>> {
    let bad = |why: &str| Invalid::new(format!("file `{name}` in the bundle: {why}"));
    if name.is_empty() {
        return Err(Invalid::new(
            "a `files[]` part has no filename: each part's filename is the file's path in the skill's folder",
        ));
    }
    if name.len() > MAX_PATH_BYTES {
        return Err(bad(&format!(
            "its path is longer than {MAX_PATH_BYTES} bytes"
        )));
    }
    if name.contains('\0') || name.contains('\\') {
        return Err(bad(
            "paths use `/` as separator and hold no NUL or backslash",
        ));
    }
    if name.starts_with('/') {
        return Err(bad("absolute paths are not allowed"));
    }
    let parts: Vec<String> = name
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .map(str::to_string)
        .collect();
    if parts.iter().any(|p| p == "..") {
        return Err(bad("`..` is not allowed in paths"));
    }
    if parts.is_empty() {
        return Err(bad("it names no file"));
    }
    Ok(parts)
}

/// The folder every file is in, if they are all in one (it is stripped); files at the top
/// level form the bundle as they are. Anything else is two folders in one upload.
fn common_folder(files: &[(Vec<String>, Vec<u8>)]) -> Valid<Option<String>> {
    if files.iter().any(|(p, _)| p.len() == 1) {
        return Ok(None);
    }
    let first = &files[0].0[0];
    if let Some((p, _)) = files.iter().find(|(p, _)| &p[0] != first) {
        return Err(Invalid::new(format!(
            "all files of a skill must be in the same top-level folder: `{first}/` and `{}/` were both sent",
            p[0]
        )));
    }
    Ok(Some(first.clone()))
}

fn check_name(name: &str) -> Valid<()> {
    let ok = !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(Invalid::new(format!(
            "the skill's name `{name}` must be 1-{MAX_NAME_CHARS} lowercase letters, digits and hyphens (kebab-case, as in SKILL.md's `name: my-skill`)"
        )))
    }
}

/// What the front matter says.
#[derive(Debug, Default, PartialEq, Eq)]
struct FrontMatter {
    name: Option<String>,
    description: Option<String>,
}

/// Reads `name` and `description` from the YAML front matter (`---` … `---`) that opens
/// SKILL.md: plain, quoted and block (`|`, `>`) scalars; other keys are left to the model.
fn front_matter(text: &str) -> Valid<FrontMatter> {
    let mut lines = text.trim_start_matches('\u{feff}').lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return Err(Invalid::new(
            "SKILL.md must open with YAML front matter: a `---` line, `name: …` and `description: …`, and a closing `---` line",
        ));
    }
    let mut body = Vec::new();
    let mut closed = false;
    for l in lines {
        if l.trim_end() == "---" {
            closed = true;
            break;
        }
        body.push(l);
    }
    if !closed {
        return Err(Invalid::new(
            "SKILL.md's front matter is not closed: add a `---` line after it",
        ));
    }
    let mut out = FrontMatter::default();
    let mut i = 0;
    while i < body.len() {
        let line = body[i];
        i += 1;
        if line.starts_with([' ', '\t']) || line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, rest)) = line.split_once(':') else {
            return Err(Invalid::new(format!(
                "SKILL.md's front matter: line `{line}` is not `key: value`"
            )));
        };
        let rest = rest.trim();
        let mut block = Vec::new();
        while i < body.len() && (body[i].starts_with([' ', '\t']) || body[i].trim().is_empty()) {
            block.push(body[i].trim());
            i += 1;
        }
        while block.last().is_some_and(|l| l.is_empty()) {
            block.pop();
        }
        let value = if rest.starts_with('|') {
            block.join("\n")
        } else if rest.starts_with('>') || rest.is_empty() {
            block.join(" ")
        } else {
            let mut v = unquote(key.trim(), rest)?;
            for l in block {
                v.push(' ');
                v.push_str(l);
            }
            v
        };
        match key.trim() {
            "name" => out.name = Some(value.trim().to_string()),
            "description" => out.description = Some(value.trim().to_string()),
            _ => {}
        }
    }
    Ok(out)
}

fn unquote(key: &str, v: &str) -> Valid<String> {
    let quoted = |q: char| v.len() >= 2 && v.starts_with(q) && v.ends_with(q);
    if quoted('"') {
        let inner = &v[1..v.len() - 1];
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some(o) => out.push(o),
                    None => {}
                }
            } else {
                out.push(c);
            }
        }
        Ok(out)
    } else if quoted('\'') {
        Ok(v[1..v.len() - 1].replace("''", "'"))
    } else if v.starts_with(['"', '\'']) {
        Err(Invalid::new(format!(
            "SKILL.md's front matter: the quote of `{key}` is not closed"
        )))
    } else {
        // A trailing ` # comment` is YAML's, not the value's.
        Ok(v.split(" #").next().unwrap_or(v).trim_end().to_string())
    }
}

/// The bundle as a zip archive (stored, not compressed) whose entries are `<name>/<path>`,
/// with Unix modes, as `versions.download` serves it.
pub fn to_zip(name: &str, files: &[BundleFile]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for f in files {
        let path = format!("{name}/{}", f.path);
        let crc = crc32(&f.content);
        let size = f.content.len() as u32;
        let offset = out.len() as u32;
        // Local file header: version 2.0, flag 0x0800 (UTF-8 names), method 0 (stored).
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        out.extend_from_slice(&20u16.to_le_bytes());
        out.extend_from_slice(&0x0800u16.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes()); // time
        out.extend_from_slice(&0x0021u16.to_le_bytes()); // date: 1980-01-01
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&(path.len() as u16).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(path.as_bytes());
        out.extend_from_slice(&f.content);
        let mode: u32 = if f.executable { 0o100755 } else { 0o100644 };
        // Central directory entry: made by Unix (3), so the external attributes are a mode.
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&((3u16 << 8) | 20).to_le_bytes());
        central.extend_from_slice(&20u16.to_le_bytes());
        central.extend_from_slice(&0x0800u16.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes());
        central.extend_from_slice(&0u16.to_le_bytes());
        central.extend_from_slice(&0x0021u16.to_le_bytes());
        central.extend_from_slice(&crc.to_le_bytes());
        central.extend_from_slice(&size.to_le_bytes());
        central.extend_from_slice(&size.to_le_bytes());
        central.extend_from_slice(&(path.len() as u16).to_le_bytes());
        central.extend_from_slice(&[0; 8]); // extra, comment, disk, internal attributes
        central.extend_from_slice(&(mode << 16).to_le_bytes());
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(path.as_bytes());
    }
    let central_at = out.len() as u32;
    let count = files.len() as u16;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0; 4]); // disk numbers
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&central_at.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// CRC-32 (IEEE), as zip records it.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(files: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
        files
            .iter()
            .map(|(n, b)| (n.to_string(), b.as_bytes().to_vec()))
            .collect()
    }

    const MD: &str = "---\nname: pdf-tools\ndescription: Fill PDF forms\n---\n# PDF\n";

    #[test]
    fn a_folder_upload_is_stripped_of_its_folder() {
        let b = parse(up(&[
            ("pdf-tools/scripts/run.sh", "#!/bin/sh\necho hi\n"),
            ("pdf-tools/SKILL.md", MD),
        ]))
        .unwrap();
        assert_eq!(b.name, "pdf-tools");
        assert_eq!(b.description, "Fill PDF forms");
        let paths: Vec<_> = b
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.executable))
            .collect();
        assert_eq!(paths, [("SKILL.md", false), ("scripts/run.sh", true)]);
    }

    #[test]
    fn bad_bundles_say_what_is_wrong() {
        let msg = |files: &[(&str, &str)]| parse(up(files)).unwrap_err().message;
        assert!(msg(&[("a/README.md", "x")]).contains("no SKILL.md at `a/`"));
        assert!(msg(&[("a/SKILL.md", MD), ("b/x", "y")]).contains("same top-level folder"));
        assert!(msg(&[("../SKILL.md", MD)]).contains("`..`"));
        assert!(msg(&[("/etc/SKILL.md", MD)]).contains("absolute"));
        assert!(msg(&[("SKILL.md", "# no front matter")]).contains("front matter"));
        assert!(msg(&[("SKILL.md", "---\nname: x\n")]).contains("not closed"));
        assert!(msg(&[("SKILL.md", "---\nname: x\n---\n")]).contains("`description`"));
        assert!(
            msg(&[("SKILL.md", "---\nname: Bad Name\ndescription: d\n---\n")])
                .contains("kebab-case")
        );
        assert!(msg(&[("SKILL.md", "---\ndescription: d\n---\n")]).contains("no `name`"));
        assert!(msg(&[("a/SKILL.md", MD), ("a/./SKILL.md", MD)]).contains("twice"));
        let big = "x".repeat(MAX_BUNDLE_BYTES);
        let e = parse(up(&[("SKILL.md", MD), ("big", &big)])).unwrap_err();
        assert_eq!(e.code, Some("skill_too_large"));
    }

    #[test]
    fn front_matter_reads_quoted_and_block_scalars() {
        let f = front_matter(
            "---\nname: \"my-skill\"\ndescription: >\n  Does one\n  thing.\nlicense: MIT\n---\n",
        )
        .unwrap();
        assert_eq!(f.name.as_deref(), Some("my-skill"));
        assert_eq!(f.description.as_deref(), Some("Does one thing."));
        let f = front_matter("---\nname: x # c\ndescription: 'it''s'\n---").unwrap();
        assert_eq!(f.name.as_deref(), Some("x"));
        assert_eq!(f.description.as_deref(), Some("it's"));
        // With no name, the folder names the skill.
        let b = parse(up(&[(
            "folder-name/SKILL.md",
            "---\ndescription: d\n---\n",
        )]))
        .unwrap();
        assert_eq!(b.name, "folder-name");
    }

    #[test]
    fn crc_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        let z = to_zip(
            "s",
            &[BundleFile {
                path: "SKILL.md".into(),
                executable: false,
                content: b"hi".to_vec(),
            }],
        );
        assert_eq!(&z[..4], b"PK\x03\x04");
        assert_eq!(&z[z.len() - 22..z.len() - 18], b"PK\x05\x06");
    }
}
