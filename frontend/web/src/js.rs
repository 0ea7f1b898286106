//! Reading an answer the browser parsed (`api::get_js`) into escaped HTML: for views that show a
//! few fields of a large answer, without a serde decoder or a view per cell in the bundle.

use wasm_bindgen::JsValue;

/// `value[key]`, or null.
pub fn at(value: &JsValue, key: &str) -> JsValue {
    js_sys::Reflect::get(value, &JsValue::from_str(key)).unwrap_or(JsValue::NULL)
}

/// The number at `path` (`"key"` or `"a.b.c"`), when it is one.
pub fn number(value: &JsValue, path: &str) -> Option<f64> {
    path.split('.')
        .fold(value.clone(), |v, key| at(&v, key))
        .as_f64()
}

/// The `data-{name}` attribute of the element an event happened on: for HTML written as one
/// node, whose controls one listener on their container tells apart.
pub fn data_of(event: &web_sys::Event, name: &str) -> Option<String> {
    use wasm_bindgen::JsCast;
    event
        .target()?
        .dyn_into::<web_sys::Element>()
        .ok()?
        .get_attribute(&format!("data-{name}"))
}

/// `value[key]` as text (a string, or a number as written), escaped for HTML.
pub fn text(value: &JsValue, key: &str) -> String {
    let v = at(value, key);
    let t = v
        .as_string()
        .or_else(|| v.as_f64().map(|n| n.to_string()))
        .unwrap_or_default();
    escape(&t)
}

/// `value[key]` as an array (empty when it is none).
pub fn each(value: &JsValue, key: &str) -> js_sys::Array {
    js_sys::Array::from(&at(value, key))
}

/// The answer's `problems`, joined, escaped.
pub fn problems(value: &JsValue) -> String {
    let said: Vec<String> = each(value, "problems")
        .iter()
        .filter_map(|p| p.as_string())
        .collect();
    escape(&said.join("; "))
}

/// `text` made safe inside HTML, in an element or a double-quoted attribute.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
