//! The protobuf codec of every Toolplane gRPC service: prost's, except that a message that
//! cannot be decoded (truncated, a wrong wire type, nested past prost's recursion limit of
//! 100) is the caller's fault — `INVALID_ARGUMENT` — where prost's codec says `INTERNAL`.

use tonic::codec::{BufferSettings, DecodeBuf};
use tonic::{Code, Status};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// `tonic_prost::ProstCodec` with decode errors reported as `INVALID_ARGUMENT`.
#[derive(Debug)]
pub struct Codec<T, U>(ProstCodec<T, U>);

impl<T, U> Default for Codec<T, U> {
    fn default() -> Self {
        Codec(ProstCodec::default())
    }
}

impl<T, U> tonic::codec::Codec for Codec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = Decoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        self.0.encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        Decoder(self.0.decoder())
    }
}

/// Prost's decoder with its errors reclassified.
#[derive(Debug)]
pub struct Decoder<U>(ProstDecoder<U>);

impl<U: prost::Message + Default> tonic::codec::Decoder for Decoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(buf).map_err(|status| {
            if status.code() == Code::Internal {
                crate::status::error(
                    tp_registry::ErrorCode::InvalidArgument,
                    format!(
                        "the message could not be decoded as protobuf: {}",
                        status.message()
                    ),
                )
            } else {
                status
            }
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}

#[cfg(test)]
mod tests {
    use prost::Message as _;

    #[test]
    fn a_struct_nested_past_the_recursion_limit_is_invalid() {
        // 30,000 levels of Struct { fields: { "a": Value { struct_value: … } } }, built as
        // bytes from the inside out (building the message itself would recurse as deep).
        let mut bytes: Vec<u8> = Vec::new();
        for _ in 0..30_000 {
            // Value { struct_value (5): bytes }
            let mut value = vec![0x2a];
            prost::encoding::encode_varint(bytes.len() as u64, &mut value);
            value.extend_from_slice(&bytes);
            // MapEntry { key (1): "a", value (2): value }
            let mut entry = vec![0x0a, 0x01, b'a', 0x12];
            prost::encoding::encode_varint(value.len() as u64, &mut entry);
            entry.extend_from_slice(&value);
            // Struct { fields (1): entry }
            bytes = vec![0x0a];
            prost::encoding::encode_varint(entry.len() as u64, &mut bytes);
            bytes.extend_from_slice(&entry);
        }
        let error = prost_types::Struct::decode(bytes.as_slice()).unwrap_err();
        assert!(error.to_string().contains("recursion"), "{error}");
    }
}
