//! Handle resolution by DNS against nameservers on loopback. No DNS server can be installed
//! here, so a small responder speaks the real wire format (RFC 1035, over UDP and TCP).

use std::net::SocketAddr;

use hickory_resolver::proto::op::{Message, OpCode, ResponseCode};
use hickory_resolver::proto::rr::rdata::TXT;
use hickory_resolver::proto::rr::{RData, Record};
use svc_atproto::HandleDns;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};

const DID: &str = "did:plc:ewvi7nxzyoun6zhxrhs64oiz";

/// The responder's answer to one query, from `(handle, TXT text)` pairs.
fn answer(query: &[u8], records: &[(&str, &str)], truncate: bool) -> Vec<u8> {
    let request = Message::from_vec(query).expect("the resolver sends a DNS message");
    let mut response = Message::response(request.metadata.id, OpCode::Query);
    response.metadata.recursion_available = true;
    let question = request.queries[0].clone();
    let asked = question.name().to_string();
    response.add_query(question.clone());
    let matching: Vec<_> = records
        .iter()
        .filter(|(handle, _)| asked == format!("_atproto.{handle}."))
        .collect();
    if matching.is_empty() {
        response.metadata.response_code = ResponseCode::NXDomain;
    } else if truncate {
        response.metadata.truncation = true;
    } else {
        for (_, text) in matching {
            response.add_answer(Record::from_rdata(
                question.name().clone(),
                60,
                RData::TXT(TXT::new(vec![text.to_string()])),
            ));
        }
    }
    response.to_vec().expect("the response encodes")
}

/// A nameserver on a free loopback port: UDP answers are truncated when `truncate_udp`, so that
/// only a resolver that asks again over TCP gets the record.
async fn nameserver(records: Vec<(&'static str, &'static str)>, truncate_udp: bool) -> SocketAddr {
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = tcp.local_addr().unwrap();
    let udp = UdpSocket::bind(address).await.unwrap();
    let udp_records = records.clone();
    tokio::spawn(async move {
        let mut buffer = [0u8; 1500];
        while let Ok((n, peer)) = udp.recv_from(&mut buffer).await {
            let reply = answer(&buffer[..n], &udp_records, truncate_udp);
            let _ = udp.send_to(&reply, peer).await;
        }
    });
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = tcp.accept().await {
            let records = records.clone();
            tokio::spawn(async move {
                loop {
                    let Ok(length) = stream.read_u16().await else {
                        return;
                    };
                    let mut query = vec![0u8; usize::from(length)];
                    if stream.read_exact(&mut query).await.is_err() {
                        return;
                    }
                    let reply = answer(&query, &records, false);
                    let prefix = u16::try_from(reply.len()).unwrap().to_be_bytes();
                    if stream.write_all(&prefix).await.is_err()
                        || stream.write_all(&reply).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    address
}

/// A nameserver that never answers: a bound UDP socket nobody reads, and no TCP listener.
async fn silent_nameserver() -> (UdpSocket, SocketAddr) {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let address = socket.local_addr().unwrap();
    (socket, address)
}

#[tokio::test]
async fn a_truncated_udp_answer_is_asked_again_over_tcp() {
    let server = nameserver(
        vec![("alice.example.com", "did=did:plc:ewvi7nxzyoun6zhxrhs64oiz")],
        true,
    )
    .await;
    let dns = HandleDns::with_nameservers(&[server]).unwrap();
    assert_eq!(
        dns.txt_did("alice.example.com").await.unwrap().as_deref(),
        Some(DID)
    );
}

#[tokio::test]
async fn a_silent_nameserver_does_not_hide_the_next_one() {
    let (_silent, silent) = silent_nameserver().await;
    let server = nameserver(
        vec![("bob.example.com", "did=did:plc:ewvi7nxzyoun6zhxrhs64oiz")],
        false,
    )
    .await;
    let dns = HandleDns::with_nameservers(&[silent, server]).unwrap();
    assert_eq!(
        dns.txt_did("bob.example.com").await.unwrap().as_deref(),
        Some(DID)
    );
}

#[tokio::test]
async fn no_record_is_none_and_a_text_that_is_no_did_is_ignored() {
    let server = nameserver(vec![("carol.example.com", "v=spf1 -all")], false).await;
    let dns = HandleDns::with_nameservers(&[server]).unwrap();
    assert_eq!(dns.txt_did("nobody.example.com").await.unwrap(), None);
    assert_eq!(dns.txt_did("carol.example.com").await.unwrap(), None);
}

#[tokio::test]
async fn two_different_dids_are_an_ambiguous_handle() {
    let server = nameserver(
        vec![
            ("dave.example.com", "did=did:plc:ewvi7nxzyoun6zhxrhs64oiz"),
            ("dave.example.com", "did=did:plc:aaaaaaaaaaaaaaaaaaaaaaaa"),
        ],
        false,
    )
    .await;
    let dns = HandleDns::with_nameservers(&[server]).unwrap();
    let error = dns
        .txt_did("dave.example.com")
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("several DIDs"), "{error}");
}

#[tokio::test]
async fn no_nameserver_answering_is_an_error_naming_the_record() {
    let (_silent, silent) = silent_nameserver().await;
    let dns = HandleDns::with_nameservers(&[silent]).unwrap();
    let error = dns
        .txt_did("erin.example.com")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("DNS TXT _atproto.erin.example.com"),
        "{error}"
    );
}
