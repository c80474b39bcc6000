//! What a pass has written and not yet seen back from its watch (`Written`), so that it is not
//! written again meanwhile.

/// Writes whose watch event has not reached the cache yet. A pass that runs in between (another
/// event, or a watch that is slow to come back after an outage) still sees the old object; it does
/// not repeat a write of the same content while the cache shows the resourceVersion it showed when
/// the write was made. Once the cache shows anything else, the entry no longer holds.
#[derive(Default)]
pub(super) struct Written(
    std::sync::Mutex<std::collections::HashMap<WrittenKey, (serde_json::Value, Option<String>)>>,
);

/// (kind, namespace, name).
pub(super) type WrittenKey = (String, String, String);

impl Written {
    pub(super) fn pending(
        &self,
        key: &WrittenKey,
        content: &serde_json::Value,
        cached_version: Option<&str>,
    ) -> bool {
        self.0
            .lock()
            .map(|m| {
                m.get(key)
                    .is_some_and(|(c, v)| c == content && v.as_deref() == cached_version)
            })
            .unwrap_or(false)
    }

    pub(super) fn record(
        &self,
        key: WrittenKey,
        content: serde_json::Value,
        cached_version: Option<String>,
    ) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(key, (content, cached_version));
        }
    }

    pub(super) fn clear(&self, key: &WrittenKey) {
        if let Ok(mut m) = self.0.lock() {
            m.remove(key);
        }
    }
}

/// A status without its `lastTransitionTime`s (stamped anew by each pass until the cache has the
/// written ones).
pub(super) fn without_times(mut v: serde_json::Value) -> serde_json::Value {
    match &mut v {
        serde_json::Value::Object(m) => {
            m.remove("lastTransitionTime");
            for x in m.values_mut() {
                *x = without_times(x.take());
            }
        }
        serde_json::Value::Array(a) => {
            for x in a.iter_mut() {
                *x = without_times(x.take());
            }
        }
        _ => {}
    }
    v
}
