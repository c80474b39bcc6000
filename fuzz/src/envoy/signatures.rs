//! Each fake of envoy.rs has the type of the declaration it stands in for (module/src/abi.rs): an array
//! of the two must coerce to one function-pointer type, so a parameter or return type changed on
//! either side fails the fuzz build (which `make test` runs) instead of silently passing the module
//! wrong values. The count ties the list to envoy.rs: every fake defined there is in it.

macro_rules! fakes_match_the_declarations {
    ($($name:ident,)*) => {
        #[allow(dead_code)]
        fn fakes_have_the_declared_types() {
            $(let _ = [toolgate_module::abi::$name, super::$name];)*
        }
        const _: () = assert!(
            occurrences(include_bytes!("../envoy.rs"), b"#[no_mangle]\npub extern \"C\" fn ") == [$(stringify!($name),)*].len(),
            "a fake of Envoy's callbacks is missing from fakes_match_the_declarations!"
        );
    };
}

const fn occurrences(haystack: &[u8], needle: &[u8]) -> usize {
    let mut count = 0;
    let mut i = 0;
    while i + needle.len() <= haystack.len() {
        let mut j = 0;
        while j < needle.len() && haystack[i + j] == needle[j] {
            j += 1;
        }
        if j == needle.len() {
            count += 1;
        }
        i += 1;
    }
    count
}

fakes_match_the_declarations! {
    envoy_dynamic_module_callback_log,
    envoy_dynamic_module_callback_log_enabled,
    envoy_dynamic_module_callback_http_filter_config_define_counter,
    envoy_dynamic_module_callback_http_filter_config_increment_counter,
    envoy_dynamic_module_callback_http_filter_increment_counter,
    envoy_dynamic_module_callback_http_get_header,
    envoy_dynamic_module_callback_http_get_headers_size,
    envoy_dynamic_module_callback_http_get_metadata_keys_count,
    envoy_dynamic_module_callback_http_get_metadata_keys,
    envoy_dynamic_module_callback_http_get_headers,
    envoy_dynamic_module_callback_http_add_header,
    envoy_dynamic_module_callback_http_set_header,
    envoy_dynamic_module_callback_http_send_response,
    envoy_dynamic_module_callback_http_get_body_chunks_size,
    envoy_dynamic_module_callback_http_get_body_chunks,
    envoy_dynamic_module_callback_http_get_body_size,
    envoy_dynamic_module_callback_http_append_body,
    envoy_dynamic_module_callback_http_drain_body,
    envoy_dynamic_module_callback_http_received_buffered_request_body,
    envoy_dynamic_module_callback_http_received_buffered_response_body,
    envoy_dynamic_module_callback_http_set_filter_state_bytes,
    envoy_dynamic_module_callback_http_filter_get_attribute_string,
    envoy_dynamic_module_callback_http_filter_get_attribute_int,
    envoy_dynamic_module_callback_http_filter_http_callout,
    envoy_dynamic_module_callback_http_filter_start_http_stream,
    envoy_dynamic_module_callback_http_filter_scheduler_new,
    envoy_dynamic_module_callback_http_filter_scheduler_commit,
    envoy_dynamic_module_callback_http_filter_scheduler_delete,
    envoy_dynamic_module_callback_http_filter_continue_decoding,
}
