//! `--log FILE`: one JSON object per request received, appended and flushed at once (a test may
//! truncate the file in place between steps).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::Mutex;

use serde_json::Value as Json;

pub struct Log(Option<Mutex<File>>);

impl Log {
    pub fn open(path: Option<&str>) -> std::io::Result<Log> {
        Ok(Log(match path {
            Some(p) => Some(Mutex::new(
                OpenOptions::new().create(true).append(true).open(p)?,
            )),
            None => None,
        }))
    }

    pub fn write(&self, entry: &Json) {
        if let Some(file) = &self.0 {
            let mut line = entry.to_string();
            line.push('\n');
            let mut f = file.lock().unwrap_or_else(|e| e.into_inner());
            let _ = f.write_all(line.as_bytes());
            let _ = f.flush();
        }
    }
}
