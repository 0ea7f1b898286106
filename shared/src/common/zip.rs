//! A ZIP archive of stored (uncompressed) files, as PKWARE's APPNOTE describes it: a local
//! header before each file, then the central directory and its end record. No clock: every
//! entry is dated 1980-01-01 00:00 (the format's first day), so the same files give the same
//! bytes. Used for the planner's "all manifests as one zip" download.
//!
//! Limits: no compression, no ZIP64 (fewer than 65,535 files, each and all under 4 GiB, which
//! manifests are by orders of magnitude).

/// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320), as ZIP checksums each file.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// The archive of `files` (name, contents), in the order given.
pub fn store(files: &[(&str, &[u8])]) -> Vec<u8> {
    // DOS date of 1980-01-01: (year - 1980) << 9 | month << 5 | day; time 00:00:00.
    const DOS_DATE: u16 = 1 << 5 | 1;
    const VERSION: u16 = 20; // 2.0: what a stored file with directory entries needs
    let mut out = Vec::new();
    let mut central = Vec::new();
    let u16le = |v: u16, buf: &mut Vec<u8>| buf.extend_from_slice(&v.to_le_bytes());
    let u32le = |v: u32, buf: &mut Vec<u8>| buf.extend_from_slice(&v.to_le_bytes());
    for (name, contents) in files {
        let offset = out.len() as u32;
        let (crc, size, name_len) = (crc32(contents), contents.len() as u32, name.len() as u16);
        // Local file header.
        u32le(0x0403_4b50, &mut out);
        u16le(VERSION, &mut out);
        u16le(0x0800, &mut out); // flags: names are UTF-8
        u16le(0, &mut out); // method: stored
        u16le(0, &mut out); // time
        u16le(DOS_DATE, &mut out);
        u32le(crc, &mut out);
        u32le(size, &mut out); // compressed size
        u32le(size, &mut out); // uncompressed size
        u16le(name_len, &mut out);
        u16le(0, &mut out); // extra field length
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(contents);
        // Its central directory entry.
        u32le(0x0201_4b50, &mut central);
        u16le(VERSION, &mut central); // made by
        u16le(VERSION, &mut central); // needed
        u16le(0x0800, &mut central);
        u16le(0, &mut central);
        u16le(0, &mut central);
        u16le(DOS_DATE, &mut central);
        u32le(crc, &mut central);
        u32le(size, &mut central);
        u32le(size, &mut central);
        u16le(name_len, &mut central);
        u16le(0, &mut central); // extra
        u16le(0, &mut central); // comment
        u16le(0, &mut central); // disk number
        u16le(0, &mut central); // internal attributes
        u32le(0, &mut central); // external attributes
        u32le(offset, &mut central);
        central.extend_from_slice(name.as_bytes());
    }
    let (directory_at, directory_len) = (out.len() as u32, central.len() as u32);
    out.extend_from_slice(&central);
    // End of central directory.
    u32le(0x0605_4b50, &mut out);
    u16le(0, &mut out); // this disk
    u16le(0, &mut out); // the directory's disk
    u16le(files.len() as u16, &mut out);
    u16le(files.len() as u16, &mut out);
    u32le(directory_len, &mut out);
    u32le(directory_at, &mut out);
    u16le(0, &mut out); // comment length
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check value every CRC-32 catalogue gives for "123456789".
    #[test]
    fn crc32_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    fn u16_at(b: &[u8], at: usize) -> u16 {
        u16::from_le_bytes([b[at], b[at + 1]])
    }

    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }

    /// Walks the archive as a reader does (APPNOTE 4.3): the end record, the directory it
    /// points to, each entry's local header, and the contents behind it.
    #[test]
    fn a_reader_finds_every_file_through_the_directory() {
        let files: [(&str, &[u8]); 2] = [("kueue.yaml", b"apiVersion: v1\n"), ("keda.yaml", b"")];
        let zip = store(&files);
        let end = zip.len() - 22;
        assert_eq!(u32_at(&zip, end), 0x0605_4b50);
        assert_eq!(u16_at(&zip, end + 10), 2, "entries");
        let (len, mut at) = (
            u32_at(&zip, end + 12) as usize,
            u32_at(&zip, end + 16) as usize,
        );
        assert_eq!(
            at + len,
            end,
            "the directory ends where the end record starts"
        );
        for (name, contents) in files {
            assert_eq!(u32_at(&zip, at), 0x0201_4b50);
            let (crc, size) = (u32_at(&zip, at + 16), u32_at(&zip, at + 24) as usize);
            let name_len = u16_at(&zip, at + 28) as usize;
            assert_eq!(&zip[at + 46..at + 46 + name_len], name.as_bytes());
            let local = u32_at(&zip, at + 42) as usize;
            assert_eq!(u32_at(&zip, local), 0x0403_4b50);
            assert_eq!(u16_at(&zip, local + 8), 0, "stored");
            let data = local + 30 + u16_at(&zip, local + 26) as usize;
            assert_eq!(&zip[data..data + size], contents);
            assert_eq!(crc, crc32(contents));
            at += 46 + name_len;
        }
        assert_eq!(store(&files), zip, "the same files give the same bytes");
    }
}
