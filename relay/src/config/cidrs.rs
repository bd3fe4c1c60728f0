//! A list of address ranges (`allow_destination_cidrs`): CIDRs such as
//! `10.0.0.0/8` or `fd00::/8`, or single addresses. From a file it is an
//! array of strings; from a variable, items separated by commas; from the
//! command line, one `--allow-destination-cidr` per item.

use std::net::IpAddr;

use ipnet::IpNet;
use toml::de::DeValue;

use super::value::{Value, expected, quoted};

/// Address ranges, in the order given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CidrList(pub Vec<IpNet>);

/// One range: `ADDR/LEN`, or an address alone (its own /32 or /128).
fn one(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    if let Ok(net) = text.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    text.parse::<IpAddr>()
        .map(IpNet::from)
        .map_err(|_| format!("{text:?} is not a CIDR such as \"10.0.0.0/8\" or \"fd00::/8\""))
}

impl Value for CidrList {
    const KIND: &'static str = "a list of CIDRs such as [\"10.0.0.0/8\"]";

    fn from_text(text: &str) -> Result<Self, String> {
        text.split(',')
            .filter(|item| !item.trim().is_empty())
            .map(one)
            .collect::<Result<Vec<_>, _>>()
            .map(CidrList)
    }

    fn from_toml(value: &DeValue<'_>) -> Result<Self, String> {
        let DeValue::Array(items) = value else {
            return Err(expected(Self::KIND, value));
        };
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            match item.get_ref() {
                DeValue::String(s) => out.push(one(s)?),
                other => return Err(expected("a CIDR string", other)),
            }
        }
        Ok(CidrList(out))
    }

    fn show(&self) -> String {
        let items: Vec<String> = self.0.iter().map(|n| quoted(&n.to_string())).collect();
        format!("[{}]", items.join(", "))
    }

    fn join_repeated(mut self, more: Self) -> Self {
        self.0.extend(more.0);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_toml_and_repeats_read_alike() {
        let from_text = CidrList::from_text("10.0.0.0/8, fd00::/8,192.168.1.7").unwrap();
        let toml = DeValue::parse("[\"10.0.0.0/8\", \"fd00::/8\", \"192.168.1.7\"]").unwrap();
        assert_eq!(CidrList::from_toml(toml.get_ref()).unwrap(), from_text);
        assert_eq!(
            from_text.show(),
            "[\"10.0.0.0/8\", \"fd00::/8\", \"192.168.1.7/32\"]"
        );
        let joined = CidrList::from_text("10.0.0.0/8")
            .unwrap()
            .join_repeated(CidrList::from_text("127.0.0.0/8").unwrap());
        assert_eq!(joined.0.len(), 2);
        // Host bits are dropped: 127.0.0.1/8 is 127.0.0.0/8.
        assert_eq!(
            CidrList::from_text("127.0.0.1/8").unwrap().show(),
            "[\"127.0.0.0/8\"]"
        );
        assert_eq!(CidrList::from_text("").unwrap(), CidrList::default());
        assert!(CidrList::from_text("10.0.0.0/33").is_err());
        assert!(CidrList::from_text("localhost").is_err());
        let wrong = DeValue::parse("\"10.0.0.0/8\"").unwrap();
        assert!(CidrList::from_toml(wrong.get_ref()).is_err());
    }
}
